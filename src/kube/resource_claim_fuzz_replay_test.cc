// Runs the ResourceClaim fuzz target over the API fixtures and deterministic
// mutations of them, so it runs in every CI build without libFuzzer.
#include <cstdint>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "util/file_util.h"
#include "util/test_paths.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace nvdra::kube {
namespace {

void Feed(const std::string& s) { LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }

std::vector<std::string> Seeds() {
  std::vector<std::string> out;
  for (const char* v : {"v1", "v1beta2", "v1beta1"}) {
    auto t = ReadFileToString(std::string(NVDRA_SHARED_DIR) + "/fixtures/kubernetes-api/resource.k8s.io." + v +
                              ".ResourceClaim.json");
    EXPECT_TRUE(t.ok());
    if (t.ok()) out.push_back(*t);
  }
  out.push_back(
      R"({"kind":"ResourceClaim","status":{"allocation":{"devices":{"config":[{"opaque":{"driver":"d","parameters":{"a\"b":[1,{"}":"]"}], "e":"\u00e9"}}}]}}}})");
  out.push_back(R"({"kind":"ResourceClaim","status":{"allocation":{"devices":{"results":[null,7,{}]}}}})");
  return out;
}

TEST(ResourceClaimFuzzReplayTest, SeedsAndMutations) {
  std::mt19937 rng(42);
  size_t runs = 0;
  for (const auto& seed : Seeds()) {
    Feed(seed);
    for (size_t cut = 0; cut < seed.size(); cut += 7, ++runs) Feed(seed.substr(0, cut));
    for (int i = 0; i < 1500; ++i, ++runs) {
      std::string m = seed;
      size_t pos = rng() % m.size();
      switch (rng() % 4) {
        case 0: m[pos] = static_cast<char>(m[pos] ^ (1u << (rng() % 8))); break;
        case 1: m.erase(pos, 1 + rng() % 8); break;
        case 2: m.insert(pos, m.substr(rng() % m.size(), 1 + rng() % 16)); break;
        default: m[pos] = "{}[]\",:\\ "[rng() % 9]; break;
      }
      Feed(m);
    }
  }
  // Nesting far past the limit, at the top and inside opaque parameters.
  Feed(std::string(70'000, '[') + std::string(70'000, ']'));
  Feed(R"({"kind":"ResourceClaim","status":{"allocation":{"devices":{"config":[{"opaque":{"parameters":)" +
       std::string(70'000, '{'));
  // Reaching here means no input crashed or broke the raw-bytes invariant.
  EXPECT_GT(runs, 4000u);
}

}  // namespace
}  // namespace nvdra::kube
