// Runs the undo-record fuzz target over seed records of both kinds (as
// Prepare writes them, as a newer version might, and damaged ones) and
// deterministic mutations of them, so it runs in every build; and pins the
// shapes that once failed to survive a re-encode.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "computedomain/compute_domain_undo.h"
#include "gpu/fabric_partition_undo.h"
#include "gpu/gpu_undo_pieces.h"
#include "gpu/time_slicing_undo.h"
#include "mutate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace nvdra {
namespace {

using nlohmann::json;

void Feed(const std::string& s) { LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }

std::vector<std::string> Seeds() {
  gpu::GpuUndo g;
  g.devices = {"gpu-0", "gpu-2"};
  g.Get<gpu::TimeSlicingUndo>().items = {{"gpu-2", "GPU-2222", 2, json::object()}};
  g.Get<gpu::FabricUndo>().partition = gpu::FabricPartitionUndo{3, {1, 2}, json::object()};
  computedomain::ComputeDomainUndo cd;
  cd.domain_id = "5e2c8a14-7d3b-4f9e-a1c6-0b8d2f4e6a90";
  cd.channels = {{"channel-3", 3, json::object()}};
  cd.daemon = true;
  cd.domain_name = "domain";
  cd.domain_namespace = "default";
  return {
      gpu::EncodeGpuUndo(g).dump(),
      computedomain::EncodeComputeDomainUndo(cd).dump(),
      // A newer version's fields, unreadable items, an imported record.
      R"({"version":7,"devices":["gpu-1"],"mps":{"daemon":"x"},"timeSlicing":[42,{"uuid":7},)"
      R"({"uuid":"GPU-1","interval":1,"device":"gpu-1","priority":3}]})",
      R"({"version":2,"domainID":"d","channels":[{"device":"channel-0","id":0,"mode":"x"}],"allChannels":true,)"
      R"("future":[1.5,-0.0,1e300,18446744073709551615]})",
      R"({"legacyCheckpoint":{"x":1}})",
      "null",
      R"({"devices":null,"timeSlicing":null,"channels":null,"version":null})",
  };
}

TEST(UndoRecordReplayTest, SeedsDecodeAndTruncationsNeverCrash) {
  auto seeds = Seeds();
  EXPECT_TRUE(gpu::DecodeGpuUndo(json::parse(seeds[0])).ok());
  EXPECT_TRUE(computedomain::DecodeComputeDomainUndo(json::parse(seeds[1])).ok());
  EXPECT_TRUE(gpu::DecodeGpuUndo(json::parse(seeds[2])).ok());
  EXPECT_TRUE(computedomain::DecodeComputeDomainUndo(json::parse(seeds[3])).ok());
  for (const auto& seed : seeds) {
    for (size_t n = 0; n <= seed.size(); ++n) Feed(seed.substr(0, n));
  }
}

TEST(UndoRecordReplayTest, DeterministicMutations) {
  std::mt19937 rng(777);
  auto seeds = Seeds();
  const std::vector<std::string> tokens = {"{",
                                           "}",
                                           "[",
                                           "]",
                                           "\"",
                                           ",",
                                           ":",
                                           "null",
                                           "true",
                                           "-1",
                                           "2147483648",
                                           "9223372036854775808",
                                           "1e400",
                                           "\"id\":",
                                           "\"interval\":",
                                           "\"uuid\":",
                                           "\"gpuModuleIDs\":"};
  for (int i = 0; i < 20000; ++i) {
    std::string s = seeds[rng() % seeds.size()];
    s = fuzz::Mutate(std::move(s), rng, tokens);
    Feed(s);
  }
  SUCCEED();
}

// Numbers past int's range once decoded into an int and came back from a
// re-encode as another number (a channel id then read as negative and the
// record refused): such records are refused, or their item kept verbatim.
TEST(UndoRecordReplayTest, OutOfRangeNumbersAreRefusedOrKeptVerbatim) {
  auto cd =
      computedomain::DecodeComputeDomainUndo(json::parse(R"({"channels":[{"device":"channel-0","id":2147483648}]})"));
  EXPECT_EQ(cd.status().code(), StatusCode::kInvalidArgument);
  auto g = gpu::DecodeGpuUndo(json::parse(R"({"timeSlicing":[{"uuid":"GPU-1","interval":4294967298}]})"));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(g->Of<gpu::TimeSlicingUndo>().items.empty());
  ASSERT_EQ(g->Of<gpu::TimeSlicingUndo>().unreadable.size(), 1u);
  EXPECT_EQ(gpu::EncodeGpuUndo(*g)["timeSlicing"][0]["interval"], json(4294967298));
  auto f = gpu::DecodeGpuUndo(json::parse(R"({"fabricPartition":{"id":3,"gpuModuleIDs":[1,4294967298]}})"));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->Find<gpu::FabricUndo>(), nullptr);
  EXPECT_EQ(f->unreadable.count("fabricPartition"), 1u);
  EXPECT_EQ(gpu::EncodeGpuUndo(*f)["fabricPartition"]["gpuModuleIDs"][1], json(4294967298));
  Feed(R"({"channels":[{"device":"channel-0","id":2147483648}]})");
  Feed(R"({"timeSlicing":[{"uuid":"GPU-1","interval":4294967298}]})");
  Feed(R"({"fabricPartition":{"id":3,"gpuModuleIDs":[1,4294967298]}})");
}

TEST(UndoRecordReplayTest, DeepNestingIsRefusedBeforeDecoding) {
  Feed(R"({"future":)" + std::string(70000, '[') + std::string(70000, ']') + "}");
}

}  // namespace
}  // namespace nvdra
