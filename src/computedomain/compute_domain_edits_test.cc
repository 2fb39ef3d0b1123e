// What IMEX channel and daemon claims' containers get, pinned by golden
// files, and the ComputeDomain plugin's base spec.
#include "computedomain/compute_domain_edits.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "cdi/cdi_spec_writer.h"
#include "cdi/testdata/claim_spec_golden.h"
#include "cdi/testdata/golden.h"
#include "computedomain/compute_domain_published_devices.h"
#include "devices/device_names.h"
#include "devices/mock/mock_node_fixture.h"
#include "util/file_util.h"
#include "util/test_paths.h"

namespace nvdra::computedomain {
namespace {

const std::string kTestdata = std::string(NVDRA_SOURCE_DIR) + "/src/computedomain/testdata/";
const std::string kUid = "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b";

struct Node : devices::testing::MockNode {
  ComputeDomainEdits edits;
  explicit Node(const std::string& profile) : MockNode(profile), edits({Nodes(), DriverFiles()}) {}
};

void WriteAndCheck(const cdi::CdiSpecWriter& writer, const std::vector<cdi::SpecDevice>& devs,
                   const cdi::ContainerEdits& common, const std::string& golden) {
  nvdra::testing::ExpectClaimSpecMatchesGolden(writer, kUid, devs, common, kTestdata + golden);
}

TEST(ComputeDomainEditsTest, ImexChannelAndDaemonClaimSpecs) {
  Node f("gb200x4");
  auto ch = f.edits.Channel(0);
  ASSERT_TRUE(ch.ok()) << ch.status().ToString();
  const auto& n = ch->device_nodes.at(0);
  EXPECT_EQ(n.path, "/dev/nvidia-caps-imex-channels/channel0");
  EXPECT_EQ(n.type, "c");
  EXPECT_EQ(n.major, std::optional<int64_t>(devices::kMockImexChannelsMajor));
  EXPECT_EQ(n.minor, std::optional<int64_t>(0));
  EXPECT_EQ(n.file_mode, std::optional<uint32_t>(0666));
  cdi::CdiSpecWriter w(f.dir.path() + "/cdi", "k8s.compute-domain.nvidia.com");
  WriteAndCheck(w, {{devices::ImexChannelDeviceName(0), *ch}}, {}, "cdi-channel-claim.json");

  auto fabric = f.edits.FabricImexMgmt();
  ASSERT_TRUE(fabric.ok()) << fabric.status().ToString();
  cdi::ContainerEdits daemon = *fabric;
  // The compute-domain kind adds its environment; shown here as it would.
  daemon.env = {"CLIQUE_ID=" + f.inv.clique_id};
  const std::string uid2 = "7a1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b";
  cdi::Spec spec = w.BuildClaimSpec(uid2, {{kDaemonDeviceName, daemon}});
  ASSERT_TRUE(w.WriteClaimSpec(uid2, spec).ok());
  nvdra::testing::ExpectMatchesGolden(kTestdata + "cdi-daemon-claim.json", *ReadFileToString(*w.ClaimSpecPath(uid2)));
}

TEST(ComputeDomainEditsTest, NewChannelBeyondPrecreatedOnesIsCreated) {
  Node f("gb200x4");
  const std::string path = f.lib->driver_root().container_root() + "/dev/nvidia-caps-imex-channels/channel100";
  EXPECT_FALSE(PathExists(path));
  auto ch = f.edits.Channel(100);
  ASSERT_TRUE(ch.ok()) << ch.status().ToString();
  EXPECT_TRUE(PathExists(path));
  EXPECT_EQ(ch->device_nodes[0].minor, std::optional<int64_t>(100));
  EXPECT_FALSE(f.edits.Channel(devices::kMaxImexChannels).ok());
  EXPECT_FALSE(f.edits.Channel(-1).ok());
}

TEST(ComputeDomainEditsTest, ComputeDomainBaseSpecHasTheManagementDeviceAndTheDriver) {
  Node f("gb200x4");
  auto spec = f.edits.BaseSpec("k8s.compute-domain.nvidia.com");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->kind, "k8s.compute-domain.nvidia.com/device");
  ASSERT_EQ(spec->devices.size(), 1u);
  EXPECT_EQ(spec->devices[0].name, "all");
  std::vector<std::string> paths;
  for (const auto& n : spec->devices[0].edits.device_nodes) paths.push_back(n.path);
  for (const char* want : {"/dev/nvidia0", "/dev/nvidia3", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-modeset",
                           "/dev/nvidia-caps/nvidia-cap1", "/dev/nvidia-caps-imex-channels/channel0"}) {
    EXPECT_NE(std::find(paths.begin(), paths.end(), want), paths.end()) << want;
  }
  EXPECT_EQ(std::find(paths.begin(), paths.end(), "/dev/nvidia-caps"), paths.end()) << "a directory is no node";
  EXPECT_EQ(spec->edits.env.back(), "NVIDIA_VISIBLE_DEVICES=void");
  // The driver files' hooks, the GBM link's first (the mock ships
  // libnvidia-allocator).
  EXPECT_EQ(spec->edits.hooks.size(), 5u);
  EXPECT_FALSE(spec->edits.mounts.empty());
  EXPECT_TRUE(cdi::ValidateSpec(*spec).ok());
  EXPECT_EQ(cdi::MinimumVersion(*spec), "0.5.0");  // hostPath under /run/nvidia/driver
}

}  // namespace
}  // namespace nvdra::computedomain
