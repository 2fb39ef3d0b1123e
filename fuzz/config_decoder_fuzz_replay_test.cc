// Runs the opaque config fuzz target over the configs of the upstream user
// specs, hand-written configs of every kind, and deterministic mutations of
// them, so it runs in every CI build without libFuzzer.
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "config/config_decoder.h"
#include "config/yaml_to_json.h"
#include "util/file_util.h"
#include "util/test_paths.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace nvdra::config {
namespace {

void Feed(const std::string& s) { LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }

std::vector<std::string> Seeds() {
  std::vector<std::string> out;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(NVDRA_SHARED_DIR) + "/fixtures/upstream-user-specs")) {
    if (entry.path().extension() != ".yaml") continue;
    auto text = ReadFileToString(entry.path().string());
    EXPECT_TRUE(text.ok());
    if (!text.ok()) continue;
    for (const auto& mc : testing::OpaqueConfigsInManifest(*text)) {
      if (mc.config.opaque) out.push_back(mc.config.parameters_json);
    }
  }
  const char* api = R"("apiVersion":"resource.nvidia.com/v1beta1")";
  for (const std::string body :
       {R"("kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Long"}})",
        R"("kind":"GpuConfig","sharing":{"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":50,)"
        R"("defaultPinnedDeviceMemoryLimit":"10Gi","defaultPerDevicePinnedMemoryLimit":{"0":"5Gi"}}})",
        R"("kind":"MigDeviceConfig","sharing":{"strategy":"TimeSlicing"})",
        R"("kind":"VfioDeviceConfig","iommu":{"backend":"iommufd"})",
        R"("kind":"ComputeDomainChannelConfig","domainID":"d","allocationMode":"All")",
        R"("kind":"ComputeDomainDaemonConfig","domainID":"d")"}) {
    out.push_back("{" + std::string(api) + "," + body + "}");
  }
  return out;
}

TEST(ConfigDecoderFuzzReplayTest, SeedsAndMutations) {
  std::mt19937 rng(7);
  size_t runs = 0, decoded = 0;
  auto seeds = Seeds();
  ASSERT_GE(seeds.size(), 8u);
  for (const auto& seed : seeds) {
    Feed(seed);
    if (DecodeStrict(seed).ok()) ++decoded;
    for (size_t cut = 0; cut < seed.size(); cut += 5, ++runs) Feed(seed.substr(0, cut));
    for (int i = 0; i < 800; ++i, ++runs) {
      std::string m = seed;
      size_t pos = rng() % m.size();
      switch (rng() % 5) {
        case 0: m[pos] = static_cast<char>(m[pos] ^ (1u << (rng() % 8))); break;
        case 1: m.erase(pos, 1 + rng() % 8); break;
        case 2: m.insert(pos, m.substr(rng() % m.size(), 1 + rng() % 16)); break;
        case 3: m.insert(pos, std::string(1 + rng() % 200, "[{"[rng() % 2])); break;
        default: m[pos] = "{}[]\",:\\ 0-e"[rng() % 13]; break;
      }
      Feed(m);
    }
  }
  // Nesting far past any limit, at the top and inside a field.
  Feed(std::string(70'000, '[') + std::string(70'000, ']'));
  Feed(R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":)" + std::string(70'000, '{'));
  // Reaching here means no input crashed or broke a round trip; the seeds
  // themselves are valid configs, so the round trips were exercised.
  EXPECT_GE(decoded, 6u);
  EXPECT_GT(runs, 5000u);
}

}  // namespace
}  // namespace nvdra::config
