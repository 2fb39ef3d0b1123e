// RenderJson writes the spec directly; this holds it byte for byte equal to
// the same spec built as an ordered_json document and dumped with dump(2),
// which is how specs were written before (and what runtimes and earlier
// versions of nvdra compare against), for every field and for strings that
// need escaping.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <random>

#include "cdi/spec.h"

namespace nvdra::cdi {
namespace {

using ordered_json = nlohmann::ordered_json;

// The edits as the document-building writer (RenderEditsJson) makes them,
// read back in order.
ordered_json DomEdits(const ContainerEdits& e) { return ordered_json::parse(RenderEditsJson(e)); }

std::string DomRender(const Spec& spec) {
  ordered_json j = ordered_json::object();
  j["cdiVersion"] = MinimumVersion(spec);
  j["kind"] = spec.kind;
  ordered_json devices = ordered_json::array();
  for (const auto& d : spec.devices) {
    ordered_json dj = ordered_json::object();
    dj["name"] = d.name;
    dj["containerEdits"] = DomEdits(d.edits);
    devices.push_back(std::move(dj));
  }
  j["devices"] = std::move(devices);
  const ContainerEdits edits = SpecLevelEdits(spec);
  if (!edits.empty()) j["containerEdits"] = DomEdits(edits);
  return j.dump(2) + "\n";
}

// Strings from a small alphabet that includes what JSON escapes, DEL and
// UTF-8, so every path of the writer's string handling is taken.
std::string RandomString(std::mt19937& rng) {
  static const std::vector<std::string> parts = {"/usr/lib", "x",  "-",    ".so.1", " ",    "\"",       "\\",
                                                 "\n",       "\t", "\x01", "\x1f",  "\x7f", "\xc3\xbc", "\xe2\x82\xac",
                                                 "=",        ""};
  std::string s;
  int n = std::uniform_int_distribution<int>(0, 4)(rng);
  for (int i = 0; i < n; ++i) s += parts[std::uniform_int_distribution<size_t>(0, parts.size() - 1)(rng)];
  return s;
}

std::vector<std::string> RandomStrings(std::mt19937& rng) {
  std::vector<std::string> v(std::uniform_int_distribution<int>(0, 3)(rng));
  for (auto& s : v) s = RandomString(rng);
  return v;
}

ContainerEdits RandomEdits(std::mt19937& rng) {
  auto coin = [&] { return std::uniform_int_distribution<int>(0, 1)(rng) == 1; };
  ContainerEdits e;
  e.env = RandomStrings(rng);
  for (int i = std::uniform_int_distribution<int>(0, 3)(rng); i > 0; --i) {
    DeviceNode n{.path = RandomString(rng)};
    if (coin()) n.host_path = RandomString(rng);
    if (coin()) n.type = coin() ? "c" : "b";
    if (coin()) n.major = std::uniform_int_distribution<int64_t>(-5, 1 << 20)(rng);
    if (coin()) n.minor = std::uniform_int_distribution<int64_t>(0, 1 << 20)(rng);
    if (coin()) n.file_mode = std::uniform_int_distribution<uint32_t>(0, 0777)(rng);
    if (coin()) n.permissions = "rw";
    e.device_nodes.push_back(n);
  }
  for (int i = std::uniform_int_distribution<int>(0, 2)(rng); i > 0; --i) {
    Hook h{.hook_name = "createContainer",
           .path = RandomString(rng),
           .args = RandomStrings(rng),
           .env = RandomStrings(rng)};
    if (coin()) h.timeout = std::uniform_int_distribution<int>(-1, 100)(rng);
    e.hooks.push_back(h);
  }
  for (int i = std::uniform_int_distribution<int>(0, 4)(rng); i > 0; --i) {
    Mount m{.host_path = RandomString(rng), .container_path = RandomString(rng), .options = RandomStrings(rng)};
    if (coin()) m.type = "bind";
    e.mounts.push_back(m);
  }
  return e;
}

TEST(SpecRenderTest, EqualsTheDocumentsDumpForRandomSpecs) {
  std::mt19937 rng(20261201);
  for (int i = 0; i < 500; ++i) {
    Spec s;
    s.kind = "k8s.gpu.nvidia.com/claim";
    for (int d = std::uniform_int_distribution<int>(0, 3)(rng); d > 0; --d) {
      s.devices.push_back({"uid-gpu-" + std::to_string(d), RandomEdits(rng)});
    }
    if (std::uniform_int_distribution<int>(0, 3)(rng) != 0) s.edits = RandomEdits(rng);
    ASSERT_EQ(RenderJson(s), DomRender(s)) << "spec " << i;
  }
}

// One renderer over a run of specs that share their spec-level edits
// (the driver's files), with edits of their own beside them: the shared
// text it splices must give the document's bytes for each spec, never the
// text of earlier shared edits, whatever each spec adds to each list.
TEST(SpecRenderTest, RendererSplicesSharedEditsTextOfTheSpecsOwn) {
  std::mt19937 rng(20261205);
  SpecRenderer renderer;
  auto shared = std::make_shared<const ContainerEdits>(RandomEdits(rng));
  for (int i = 0; i < 300; ++i) {
    Spec s;
    s.kind = "k8s.gpu.nvidia.com/claim";
    s.devices.push_back({"uid" + std::to_string(i) + "-gpu-0", RandomEdits(rng)});
    int pick = std::uniform_int_distribution<int>(0, 6)(rng);
    if (pick == 0) shared = std::make_shared<const ContainerEdits>(RandomEdits(rng));  // the driver changed
    if (pick == 1) shared = std::make_shared<const ContainerEdits>();
    s.shared_edits = pick == 2 ? nullptr : shared;
    if (pick == 3) s.edits = RandomEdits(rng);
    if (pick >= 4) s.edits.env.push_back("NVDRA_CLAIM_" + std::to_string(i) + "=ns/name");
    const std::string want = DomRender(s);
    ASSERT_EQ(renderer.Render(s), want) << "spec " << i;
    ASSERT_EQ(RenderJson(s), want) << "spec " << i;
  }
}

// Shared edits write as though they were the first entries of the spec's
// own: the same bytes, the same version, equal specs.
TEST(SpecRenderTest, SharedEditsWriteAsTheFirstEntriesOfEachList) {
  ContainerEdits shared{.env = {"A=1"},
                        .device_nodes = {{.path = "/dev/nvidiactl", .host_path = "/run/nvidia/driver/dev/nvidiactl"}},
                        .mounts = {{.host_path = "/h/lib.so", .container_path = "/lib.so", .options = {"ro"}}}};
  ContainerEdits own{.env = {"NVDRA_CLAIM_x=ns/name"}, .mounts = {{.host_path = "/h/b", .container_path = "/b"}}};
  Spec flat;
  flat.kind = "k8s.gpu.nvidia.com/claim";
  flat.devices.push_back({"uid-gpu-0", ContainerEdits{.device_nodes = {{.path = "/dev/nvidia0"}}}});
  flat.edits = shared;
  flat.edits.env.push_back(own.env[0]);
  flat.edits.mounts.push_back(own.mounts[0]);
  Spec split = flat;
  split.edits = own;
  split.shared_edits = std::make_shared<const ContainerEdits>(shared);
  EXPECT_EQ(split, flat);
  EXPECT_EQ(MinimumVersion(split), "0.5.0");  // the shared node's hostPath
  EXPECT_EQ(SpecRenderer().Render(split), RenderJson(flat));
  EXPECT_EQ(RenderJson(split), RenderJson(flat));
  split.edits.env.clear();
  EXPECT_NE(split, flat);
  ContainerEdits bad = shared;
  bad.mounts[0].container_path = "relative";
  split.shared_edits = std::make_shared<const ContainerEdits>(bad);
  EXPECT_FALSE(ValidateSpec(split).ok());
}

TEST(SpecRenderTest, EmptyContainersAndEscapes) {
  Spec s;
  s.kind = "k8s.gpu.nvidia.com/claim";
  s.devices.push_back({"a", ContainerEdits{}});  // "containerEdits": {}
  s.devices.push_back({"b", ContainerEdits{.env = {"A=\"quoted\" \\ back\nslash\x01", "B=\xc3\xbc"}}});
  EXPECT_EQ(RenderJson(s), DomRender(s));
  EXPECT_NE(RenderJson(s).find("\"containerEdits\": {}"), std::string::npos) << RenderJson(s);
  EXPECT_NE(RenderJson(s).find("\\u0001"), std::string::npos) << RenderJson(s);
  Spec none;
  none.kind = "k8s.gpu.nvidia.com/claim";
  EXPECT_EQ(RenderJson(none), DomRender(none));
  EXPECT_NE(RenderJson(none).find("\"devices\": []"), std::string::npos) << RenderJson(none);
}

// Each byte that needs more than itself, at each place of strings long
// enough to be checked eight bytes at a time.
TEST(SpecRenderTest, EveryByteThatNeedsEscapingIsFoundAnywhere) {
  for (const std::string special : {"\x01", "\x1f", "\"", "\\", "\x7f", "\xc3\xbc"}) {
    for (size_t len = 1; len <= 24; ++len) {
      for (size_t at = 0; at < len; ++at) {
        Spec s;
        s.kind = "k8s.gpu.nvidia.com/claim";
        std::string v(len, 'a');
        v.replace(at, 1, special);
        s.devices.push_back({"a", ContainerEdits{.env = {"A=" + v}}});
        ASSERT_EQ(RenderJson(s), DomRender(s)) << len << " " << at;
      }
    }
  }
}

TEST(SpecRenderTest, InvalidUtf8IsRefusedAsBefore) {
  Spec s;
  s.kind = "k8s.gpu.nvidia.com/claim";
  s.devices.push_back({"a", ContainerEdits{.env = {"A=\xff"}}});
  EXPECT_THROW(DomRender(s), nlohmann::json::exception);
  EXPECT_THROW(RenderJson(s), nlohmann::json::exception);
}

}  // namespace
}  // namespace nvdra::cdi
