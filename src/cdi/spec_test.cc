#include "cdi/spec.h"
#include "util/test_paths.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include <set>

#include "cdi/testdata/golden.h"

namespace nvdra::cdi {
namespace {

const std::string kTestdata = std::string(NVDRA_SOURCE_DIR) + "/src/cdi/testdata/";

ContainerEdits NodeEdits(const std::string& path) {
  ContainerEdits e;
  e.device_nodes.push_back({.path = path});
  return e;
}

Spec SampleSpec() {
  Spec s;
  s.kind = "k8s.gpu.nvidia.com/claim";
  ContainerEdits gpu;
  gpu.device_nodes.push_back({.path = "/dev/nvidia0", .host_path = "/run/nvidia/driver/dev/nvidia0"});
  ContainerEdits mig;
  mig.device_nodes.push_back(
      {.path = "/dev/nvidia-caps/nvidia-cap21", .type = "c", .major = 236, .minor = 21, .file_mode = 0444});
  s.devices.push_back({"3a1b2c3d-0000-4000-8000-000000000001-gpu-0", gpu});
  s.devices.push_back({"3a1b2c3d-0000-4000-8000-000000000001-gpu-1-mig-1g10gb-19-0", mig});
  s.edits.env = {"NVIDIA_VISIBLE_DEVICES=void"};
  s.edits.device_nodes.push_back({.path = "/dev/nvidiactl"});
  s.edits.mounts.push_back({.host_path = "/var/lib/x",
                            .container_path = "/x",
                            .options = {"ro", "nosuid", "nodev", "bind"}});
  s.edits.hooks.push_back({.hook_name = "createContainer",
                           .path = "/usr/bin/nvidia-cdi-hook",
                           .args = {"nvidia-cdi-hook", "update-ldcache"}});
  return s;
}

TEST(CdiSpecTest, VersionIsBaselineForLetterNamesWithoutNewFields) {
  Spec s;
  s.kind = "k8s.gpu.nvidia.com/device";
  s.devices.push_back({"all", NodeEdits("/dev/nvidia0")});
  EXPECT_EQ(MinimumVersion(s), "0.3.0");
}

TEST(CdiSpecTest, MountTypeNeeds040) {
  Spec s;
  s.kind = "k8s.gpu.nvidia.com/device";
  ContainerEdits e;
  e.mounts.push_back({.host_path = "/a", .container_path = "/b", .type = "bind"});
  s.devices.push_back({"all", e});
  EXPECT_EQ(MinimumVersion(s), "0.4.0");
}

TEST(CdiSpecTest, DigitLeadingDeviceNameNeeds050) {
  Spec s;
  s.kind = "k8s.gpu.nvidia.com/claim";
  s.devices.push_back({"0abc-gpu-0", NodeEdits("/dev/nvidia0")});
  EXPECT_EQ(MinimumVersion(s), "0.5.0");
}

TEST(CdiSpecTest, HostPathNeeds050EvenAtSpecLevel) {
  Spec s;
  s.kind = "k8s.gpu.nvidia.com/claim";
  s.devices.push_back({"abc-gpu-0", NodeEdits("/dev/nvidia0")});
  s.edits.device_nodes.push_back({.path = "/dev/nvidiactl", .host_path = "/r/dev/nvidiactl"});
  EXPECT_EQ(MinimumVersion(s), "0.5.0");
}

TEST(CdiSpecTest, NeverAboveMaxWrittenVersion) {
  Spec s = SampleSpec();
  EXPECT_LE(MinimumVersion(s), std::string(kMaxWrittenVersion));
}

TEST(CdiSpecTest, RejectsOneCharacterVendorAndClass) {
  Spec s;
  s.devices.push_back({"gpu-0", NodeEdits("/dev/nvidia0")});
  s.kind = "a/claim";
  EXPECT_FALSE(ValidateSpec(s).ok());
  s.kind = "k8s.gpu.nvidia.com/c";
  EXPECT_FALSE(ValidateSpec(s).ok());
  s.kind = "k8s.gpu.nvidia.com/cl.aim";  // a dotted class needs 0.6.0
  EXPECT_FALSE(ValidateSpec(s).ok());
  s.kind = "k8s.gpu.nvidia.com";
  EXPECT_FALSE(ValidateSpec(s).ok());
  s.kind = "k8s.gpu.nvidia.com/claim";
  EXPECT_TRUE(ValidateSpec(s).ok()) << ValidateSpec(s).ToString();
}

TEST(CdiSpecTest, RejectsBadDevices) {
  Spec s;
  s.kind = "k8s.gpu.nvidia.com/claim";
  s.devices.push_back({"gpu-0", ContainerEdits{}});
  EXPECT_FALSE(ValidateSpec(s).ok()) << "device without edits";
  s.devices = {{"gpu/0", NodeEdits("/dev/nvidia0")}};
  EXPECT_FALSE(ValidateSpec(s).ok()) << "slash in device name";
  s.devices = {{"gpu-0", NodeEdits("dev/nvidia0")}};
  EXPECT_FALSE(ValidateSpec(s).ok()) << "relative path";
  s.devices = {{"gpu-0", NodeEdits("/dev/nvidia0")}, {"gpu-0", NodeEdits("/dev/nvidia1")}};
  EXPECT_FALSE(ValidateSpec(s).ok()) << "duplicate";
  s.devices = {};
  EXPECT_FALSE(ValidateSpec(s).ok()) << "no devices";
  ContainerEdits bad_type = NodeEdits("/dev/x");
  bad_type.device_nodes[0].type = "z";
  s.devices = {{"gpu-0", bad_type}};
  EXPECT_FALSE(ValidateSpec(s).ok());
  ContainerEdits bad_env;
  bad_env.env = {"NOEQUALS"};
  s.devices = {{"gpu-0", bad_env}};
  EXPECT_FALSE(ValidateSpec(s).ok());
}

TEST(CdiSpecTest, RenderMatchesGoldenAndParsesAsJsonAndYaml) {
  Spec s = SampleSpec();
  ASSERT_TRUE(ValidateSpec(s).ok()) << ValidateSpec(s).ToString();
  std::string out = RenderJson(s);
  nvdra::testing::ExpectMatchesGolden(kTestdata + "sample_spec.json", out);

  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["cdiVersion"], "0.5.0");
  EXPECT_EQ(j["devices"].size(), 2u);
  EXPECT_EQ(j["devices"][1]["containerEdits"]["deviceNodes"][0]["fileMode"], 0444);

  YAML::Node y = YAML::Load(out);
  EXPECT_EQ(y["kind"].as<std::string>(), "k8s.gpu.nvidia.com/claim");
  EXPECT_EQ(y["devices"][1]["containerEdits"]["deviceNodes"][0]["major"].as<int>(), 236);
}

TEST(CdiSpecTest, HooksNeedNoNewerVersionAndAreValidated) {
  Spec s;
  s.kind = "k8s.gpu.nvidia.com/claim";
  s.devices.push_back({"gpu-0", {.device_nodes = {{.path = "/dev/nvidia0"}}}});
  s.edits.hooks.push_back({.hook_name = "createContainer",
                           .path = "/usr/bin/nvidia-cdi-hook",
                           .args = {"nvidia-cdi-hook", "disable-device-node-modification"},
                           .env = {"NVIDIA_CTK_DEBUG=false"}});
  EXPECT_TRUE(ValidateSpec(s).ok());
  EXPECT_EQ(MinimumVersion(s), "0.3.0");
  Spec bad = s;
  bad.edits.hooks[0].hook_name = "beforeStart";
  EXPECT_NE(ValidateSpec(bad).message().find("invalid hookName"), std::string::npos);
  bad = s;
  bad.edits.hooks[0].path = "nvidia-cdi-hook";
  EXPECT_NE(ValidateSpec(bad).message().find("is not absolute"), std::string::npos);
  bad = s;
  bad.edits.hooks[0].env = {"NOEQUALS"};
  EXPECT_NE(ValidateSpec(bad).message().find("KEY=VALUE"), std::string::npos);
}

TEST(CdiSpecTest, RenderIsByteStable) { EXPECT_EQ(RenderJson(SampleSpec()), RenderJson(SampleSpec())); }

TEST(CdiSpecTest, RenderUsesOnlyFieldsA050ReaderKnows) {
  // The field sets of specs-go v0.5.0; anything else makes strict readers fail.
  const std::set<std::string> spec_keys = {"cdiVersion", "kind", "devices", "containerEdits"};
  const std::set<std::string> edit_keys = {"env", "deviceNodes", "hooks", "mounts"};
  const std::set<std::string> node_keys = {"path",     "hostPath",    "type", "major", "minor",
                                           "fileMode", "permissions", "uid",  "gid"};
  auto j = nlohmann::json::parse(RenderJson(SampleSpec()));
  for (auto& [k, v] : j.items()) EXPECT_TRUE(spec_keys.count(k)) << k;
  auto check_edits = [&](const nlohmann::json& e) {
    for (auto& [k, v] : e.items()) EXPECT_TRUE(edit_keys.count(k)) << k;
    if (e.contains("deviceNodes")) {
      for (const auto& n : e["deviceNodes"]) {
        for (auto& [k, v] : n.items()) EXPECT_TRUE(node_keys.count(k)) << k;
      }
    }
  };
  check_edits(j["containerEdits"]);
  for (const auto& d : j["devices"]) {
    for (auto& [k, v] : d.items()) EXPECT_TRUE(k == "name" || k == "containerEdits") << k;
    check_edits(d["containerEdits"]);
  }
}

TEST(CdiSpecTest, AppendSkipsDuplicates) {
  ContainerEdits a = NodeEdits("/dev/nvidiactl");
  a.env = {"A=1"};
  ContainerEdits b = NodeEdits("/dev/nvidiactl");
  b.device_nodes.push_back({.path = "/dev/nvidia-uvm"});
  b.env = {"A=1", "B=2"};
  a.Append(b);
  EXPECT_EQ(a.device_nodes.size(), 2u);
  EXPECT_EQ(a.env, (std::vector<std::string>{"A=1", "B=2"}));
}

}  // namespace
}  // namespace nvdra::cdi
