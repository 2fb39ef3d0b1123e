// Runs the checkpoint-import fuzz target over seed checkpoints and
// deterministic mutations of them, so it runs in every build; and pins that
// nesting far beyond any real file is refused without recursion.
#include <cstdint>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "ledger/legacy_checkpoint.h"
#include "mutate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace nvdra::ledger {
namespace {

void Feed(const std::string& s) { LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }

std::string Sealed(const std::string& claims, bool v1_only = false) {
  if (v1_only) {
    std::string v1 = R"({"preparedClaims":)" + claims + "}";
    return R"({"checksum":)" + std::to_string(GoChecksum(R"({"checksum":0,"v1":)" + v1 + "}")) + R"(,"v1":)" + v1 + "}";
  }
  std::string v2 = R"({"checksum":0,"preparedClaims":)" + claims + R"(,"nodeBootID":"b"})";
  std::string sum = std::to_string(GoChecksum(v2));
  v2.replace(v2.find(":0,") + 1, 1, sum);
  return R"({"checksum":1083090442,"v1":{},"v2":)" + v2 + "}";
}

std::vector<std::string> Seeds() {
  const std::string gpu =
      R"({"7a4e1a8e-0000-4000-8000-000000000001":{"checkpointState":"PrepareCompleted","status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.nvidia.com","pool":"n","device":"gpu-0"}]}}},"preparedDevices":[{"devices":[{"gpu":{"info":{"uuid":"GPU-1"},"device":{"Requests":["gpu"],"PoolName":"n","DeviceName":"gpu-0","CDIDeviceIDs":["x"]}},"mig":null}],"configState":{"mpsControlDaemonID":""}}],"name":"c","namespace":"d"}})";
  const std::string cd =
      R"({"uid-2":{"checkpointState":"PrepareStarted","status":{"allocation":{"devices":{"results":[{"request":"c","driver":"compute-domain.nvidia.com","pool":"n","device":"channel-0"}],"config":[{"source":"FromClaim","opaque":{"driver":"compute-domain.nvidia.com","parameters":{"kind":"ComputeDomainChannelConfig","domainID":"x","allocationMode":"All"}}}]}}}}})";
  const std::string legacy =
      R"({"uid-3":[{"devices":[{"request_names":["r"],"pool_name":"p","device_name":"channel-0"}]}]})";
  return {Sealed(gpu), Sealed(cd), Sealed(legacy, true), Sealed("{}"), R"({"checksum":1083090442,"v1":{}})"};
}

TEST(LegacyCheckpointReplayTest, SeedsImportAndTruncationsNeverCrash) {
  int imported = 0;
  for (const auto& seed : Seeds()) {
    if (ParseLegacyCheckpoint(seed, nullptr, "b").ok()) ++imported;
    for (size_t n = 0; n <= seed.size(); ++n) Feed(seed.substr(0, n));
  }
  EXPECT_EQ(imported, 5);  // the seeds are valid, so mutations start from accepted input
}

// Runs of one bracket or quote: nesting and unbalanced text.
const std::vector<std::string> kTokens = {"{", "{{{{{{{{", "[", "[[[[[[[[", "\"", "]", "]]]]", "}", "}}}}"};

TEST(LegacyCheckpointReplayTest, DeterministicMutations) {
  std::mt19937 rng(4242);
  auto seeds = Seeds();
  for (int i = 0; i < 20000; ++i) {
    std::string s = seeds[rng() % seeds.size()];
    s = fuzz::Mutate(std::move(s), rng, kTokens);
    Feed(s);
  }
  SUCCEED();
}

TEST(LegacyCheckpointReplayTest, DeepNestingIsRefusedWithoutRecursion) {
  std::string deep = R"({"checksum":1,"v1":)" + std::string(70000, '[') + std::string(70000, ']') + "}";
  auto r = ParseLegacyCheckpoint(deep, nullptr, "b");
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  Feed(deep);
}

}  // namespace
}  // namespace nvdra::ledger
