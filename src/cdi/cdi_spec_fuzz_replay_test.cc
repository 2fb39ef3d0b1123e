// Runs the CDI spec fuzz target over specs as we and the Go driver write
// them and deterministic mutations of them, so it runs in every CI build
// without libFuzzer.
#include <cstdint>
#include <random>
#include <string>

#include <gtest/gtest.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace nvdra::cdi {
namespace {

void Feed(const std::string& s) { LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }

TEST(CdiSpecFuzzReplayTest, SeedsAndMutations) {
  const std::string uid = "0b1c2d3e-4f50-4617-8899-aabbccddeeff";
  const std::vector<std::string> seeds = {
      R"({"cdiVersion":"0.5.0","kind":"k8s.gpu.nvidia.com/claim","devices":[{"name":")" + uid +
          R"(-gpu-0","containerEdits":{"deviceNodes":[{"path":"/dev/nvidia0"}]}}],"containerEdits":{"env":["NVDRA_CLAIM_0b1c2d3e_4f50_4617_8899_aabbccddeeff=team-a/train","NVIDIA_VISIBLE_DEVICES=void"]}})",
      "---\ncdiVersion: 0.5.0\nkind: k8s.gpu.nvidia.com/claim\ndevices:\n- name: " + uid +
          "-gpu-1\n  containerEdits:\n    env:\n    - NVIDIA_VISIBLE_DEVICES=void\ncontainerEdits:\n  deviceNodes:\n"
          "  - path: /dev/nvidiactl\n",
      R"({"devices":[null,7,{"name":5},{"name":""},{"name":")" + uid +
          R"(-"}],"containerEdits":{"env":[1,"NVDRA_CLAIM_x=/","NVDRA_CLAIM_0b1c2d3e_4f50_4617_8899_aabbccddeeff=/n"]}})",
      "[a, b",
      "- just\n- a list\n",
      "{}",
      "",
      "gpu0"};
  std::mt19937 rng(7);
  size_t runs = 0;
  for (const auto& seed : seeds) {
    Feed(seed);
    ++runs;
    for (size_t cut = 0; cut < seed.size(); cut += 5, ++runs) Feed(seed.substr(0, cut));
    for (int i = 0; i < 1500 && !seed.empty(); ++i, ++runs) {
      std::string m = seed;
      size_t pos = rng() % m.size();
      switch (rng() % 4) {
        case 0: m[pos] = static_cast<char>(m[pos] ^ (1u << (rng() % 8))); break;
        case 1: m.erase(pos, 1 + rng() % 8); break;
        case 2: m.insert(pos, m.substr(rng() % m.size(), 1 + rng() % 16)); break;
        default: m[pos] = "{}[]\",:\\ -\n"[rng() % 11]; break;
      }
      Feed(m);
    }
  }
  // Nesting far past any limit, in both syntaxes.
  Feed(std::string(100000, '['));
  Feed(std::string(100000, '{'));
  Feed(std::string(5000, ' ') + "x");
  std::string deep_yaml;
  for (int i = 0; i < 2000; ++i) deep_yaml += std::string(i, ' ') + "- \n";
  Feed(deep_yaml);
  EXPECT_GT(runs, 10000u);
}

}  // namespace
}  // namespace nvdra::cdi
