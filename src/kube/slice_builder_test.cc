#include "kube/slice_builder.h"

#include <gtest/gtest.h>

namespace nvdra::kube {
namespace {

using nlohmann::json;

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

model::PublishedDevice Partition(std::string name, std::string key, std::string set) {
  model::PublishedDevice d = Dev(std::move(name), std::move(key));
  d.counter_sets.push_back({set, {{"memory", "79Gi"}, {"memory-slice-0", "1"}}});
  d.consumes_counters.push_back({set, {{"memory-slice-0", "1"}}});
  return d;
}

TEST(SliceBuilderTest, PartitionableDevicesGetASlicePerGpuWithTheirCounterSet) {
  std::vector<model::PublishedDevice> devs = {Partition("gpu-1", "0000:41:00.0", "gpu-1-counter-set"),
                                              Partition("gpu-0-mig-1g10gb-19-0", "0000:01:00.0", "gpu-0-counter-set"),
                                              Partition("gpu-0", "0000:01:00.0", "gpu-0-counter-set"),
                                              Dev("gpu-2", "0000:51:00.0")};
  auto combined = ChunkSlices(devs, false);
  ASSERT_EQ(combined.size(), 3u);
  ASSERT_EQ(combined[0].counter_sets.size(), 1u) << "one set, however many devices carry it";
  EXPECT_EQ(combined[0].counter_sets[0].name, "gpu-0-counter-set");
  ASSERT_EQ(combined[0].devices.size(), 2u);
  EXPECT_EQ(combined[0].devices[0].name, "gpu-0");
  EXPECT_TRUE(combined[0].devices[0].counter_sets.empty());
  EXPECT_EQ(combined[1].counter_sets[0].name, "gpu-1-counter-set");
  EXPECT_TRUE(combined[2].counter_sets.empty());

  auto split = ChunkSlices(devs, true);
  ASSERT_EQ(split.size(), 4u);
  EXPECT_TRUE(split[0].devices.empty());
  ASSERT_EQ(split[0].counter_sets.size(), 2u);
  EXPECT_EQ(split[0].counter_sets[1].name, "gpu-1-counter-set");
  for (size_t i = 1; i < split.size(); ++i) EXPECT_TRUE(split[i].counter_sets.empty());

  json spec = BuildSliceSpec("gpu.nvidia.com", "node-1", PoolRef{"node-1", 1, 4}, split[0], "v1");
  EXPECT_FALSE(spec.contains("devices"));
  EXPECT_EQ(spec["sharedCounters"][0]["name"], "gpu-0-counter-set");
  EXPECT_EQ(spec["sharedCounters"][0]["counters"]["memory"]["value"], "79Gi");
  spec = BuildSliceSpec("gpu.nvidia.com", "node-1", PoolRef{"node-1", 1, 3}, combined[0], "v1");
  EXPECT_EQ(spec["devices"][1]["consumesCounters"][0]["counterSet"], "gpu-0-counter-set");
  EXPECT_EQ(spec["devices"][1]["consumesCounters"][0]["counters"]["memory-slice-0"]["value"], "1");
  json beta1 = EncodeDevice(combined[0].devices[0], "v1beta1");
  EXPECT_EQ(beta1["basic"]["consumesCounters"][0]["counterSet"], "gpu-0-counter-set");
  // Without counters: chunks as before.
  EXPECT_EQ(ChunkSlices({Dev("a", "x"), Dev("b", "y")}, true).size(), 1u);
}

TEST(SliceBuilderTest, CounterSetsGetTheirOwnSliceFrom135On) {
  EXPECT_FALSE(CounterSetsInOwnSlice("v1.34.0-nvdra-test"));
  EXPECT_FALSE(CounterSetsInOwnSlice("v1.34.3"));
  EXPECT_TRUE(CounterSetsInOwnSlice("v1.35.0"));
  EXPECT_TRUE(CounterSetsInOwnSlice("v1.36.1-gke.100"));
  EXPECT_TRUE(CounterSetsInOwnSlice("v2.0.0"));
  EXPECT_FALSE(CounterSetsInOwnSlice("garbage"));
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
