#include "kube/slice_builder.h"

#include <gtest/gtest.h>

namespace nvdra::kube {
namespace {

model::PublishedDevice Dev(std::string name, std::string key) {
  model::PublishedDevice d;
  d.name = std::move(name);
  d.sort_key = std::move(key);
  d.attributes["type"] = std::string("gpu");
  d.attributes["index"] = int64_t{3};
  d.attributes["ok"] = true;
  d.attributes["driverVersion"] = model::Version{"580.1.0"};
  d.capacity["memory"] = "85899345920";
  return d;
}

TEST(SliceBuilderTest, SortedByBusIdThenName) {
  auto chunks = ChunkDevices({Dev("gpu-1", "0000:41:00.0"), Dev("b", "0000:01:00.0"), Dev("a", "0000:01:00.0"),
                              Dev("channel-0", "")});
  ASSERT_EQ(chunks.size(), 1u);
  std::vector<std::string> names;
  for (const auto& d : chunks[0]) names.push_back(d.name);
  EXPECT_EQ(names, (std::vector<std::string>{"channel-0", "a", "b", "gpu-1"}));
}

TEST(SliceBuilderTest, ChunksOf128Or64WithTaints) {
  std::vector<model::PublishedDevice> devs;
  for (int i = 0; i < 300; ++i) devs.push_back(Dev("channel-" + std::to_string(i), ""));
  auto chunks = ChunkDevices(devs);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].size(), 128u);
  EXPECT_EQ(chunks[2].size(), 300u - 256u);
  devs[7].taints.push_back({"gpu.nvidia.com/xid", "79", "NoSchedule"});
  chunks = ChunkDevices(devs);
  ASSERT_EQ(chunks.size(), 5u);
  EXPECT_EQ(chunks[0].size(), 64u);
  EXPECT_TRUE(ChunkDevices({}).empty());
}

TEST(SliceBuilderTest, EncodesV1AndV1beta1Shapes) {
  auto d = Dev("gpu-0", "0000:01:00.0");
  d.taints.push_back({"gpu.nvidia.com/xid", "79", "NoSchedule"});
  auto v1 = EncodeDevice(d, "v1");
  EXPECT_EQ(v1["name"], "gpu-0");
  EXPECT_EQ(v1["attributes"]["type"], nlohmann::json({{"string", "gpu"}}));
  EXPECT_EQ(v1["attributes"]["index"], nlohmann::json({{"int", 3}}));
  EXPECT_EQ(v1["attributes"]["ok"], nlohmann::json({{"bool", true}}));
  EXPECT_EQ(v1["attributes"]["driverVersion"], nlohmann::json({{"version", "580.1.0"}}));
  EXPECT_EQ(v1["capacity"]["memory"], nlohmann::json({{"value", "85899345920"}}));
  EXPECT_EQ(v1["taints"][0]["key"], "gpu.nvidia.com/xid");
  auto b1 = EncodeDevice(d, "v1beta1");
  EXPECT_EQ(b1["name"], "gpu-0");
  EXPECT_FALSE(b1.contains("attributes"));
  EXPECT_EQ(b1["basic"]["attributes"], v1["attributes"]);
  EXPECT_EQ(b1["basic"]["taints"], v1["taints"]);
}

TEST(SliceBuilderTest, SharedDeviceCarriesRequestPoliciesInEveryVersion) {
  model::PublishedDevice d;
  d.name = "gpu-0";
  d.capacity["memory"] = "80Gi";
  d.capacity["shares"] = "4";
  d.capacity["other"] = "7";
  d.capacity_policies["memory"] = {"0", "0", "80Gi", "1Mi"};
  d.capacity_policies["shares"] = {"1", "1", "4", "1"};
  d.allow_multiple_allocations = true;
  const auto want_fields = nlohmann::json::parse(R"({
    "allowMultipleAllocations": true,
    "capacity": {
      "memory": {"value": "80Gi", "requestPolicy": {"default": "0", "validRange": {"min": "0", "max": "80Gi", "step": "1Mi"}}},
      "other": {"value": "7"},
      "shares": {"value": "4", "requestPolicy": {"default": "1", "validRange": {"min": "1", "max": "4", "step": "1"}}}}})");
  for (const char* v : {"v1", "v1beta2"}) {
    auto want = want_fields;
    want["name"] = "gpu-0";
    EXPECT_EQ(EncodeDevice(d, v), want) << v;
  }
  EXPECT_EQ(EncodeDevice(d, "v1beta1"), (nlohmann::json{{"name", "gpu-0"}, {"basic", want_fields}}));
  d.allow_multiple_allocations = false;
  d.capacity_policies.clear();
  EXPECT_FALSE(EncodeDevice(d, "v1").contains("allowMultipleAllocations"));
  EXPECT_FALSE(EncodeDevice(d, "v1")["capacity"]["memory"].contains("requestPolicy"));
}

TEST(SliceBuilderTest, SameInventoryByteIdenticalSpec) {
  std::vector<model::PublishedDevice> a = {Dev("gpu-1", "0000:41:00.0"), Dev("gpu-0", "0000:01:00.0")};
  std::vector<model::PublishedDevice> b = {a[1], a[0]};
  auto ca = ChunkDevices(a), cb = ChunkDevices(b);
  PoolRef pool{"node1", 4, 1};
  EXPECT_EQ(BuildSliceSpec("gpu.nvidia.com", "node1", pool, ca[0], "v1").dump(),
            BuildSliceSpec("gpu.nvidia.com", "node1", pool, cb[0], "v1").dump());
  auto spec = BuildSliceSpec("gpu.nvidia.com", "node1", pool, ca[0], "v1");
  EXPECT_EQ(spec["pool"], nlohmann::json({{"name", "node1"}, {"generation", 4}, {"resourceSliceCount", 1}}));
  EXPECT_EQ(spec["nodeName"], "node1");
  EXPECT_EQ(spec["driver"], "gpu.nvidia.com");
}

}  // namespace
}  // namespace nvdra::kube
