// Runs the watch-stream fuzz target over event lines as the API server sends
// them (a Node from the fixtures, bookmarks, errors, objects of another
// kind, name or UID) and deterministic mutations of them, so it runs in
// every CI build without libFuzzer.
#include <cstdint>
#include <random>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "util/file_util.h"
#include "util/test_paths.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace nvdra::kube {
namespace {

void Feed(const std::string& s) { LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }

std::vector<std::string> Seeds() {
  std::vector<std::string> out;
  auto node = ReadFileToString(std::string(NVDRA_SHARED_DIR) + "/fixtures/kubernetes-api/core.v1.Node.json");
  EXPECT_TRUE(node.ok());
  nlohmann::json n = node.ok() ? nlohmann::json::parse(*node, nullptr, false) : nlohmann::json::object();
  if (!n.is_object()) n = nlohmann::json::object();
  n["metadata"]["name"] = "node-a";
  n["metadata"]["uid"] = "u-1";
  std::string added = nlohmann::json{{"type", "ADDED"}, {"object", n}}.dump();
  nlohmann::json other_uid = n;
  other_uid["metadata"]["uid"] = "u-2";
  out.push_back(" " + added + "\n" + nlohmann::json{{"type", "MODIFIED"}, {"object", other_uid}}.dump() + "\n" +
                nlohmann::json{{"type", "DELETED"}, {"object", n}}.dump() + "\n" + added + "\n");
  out.push_back(
      R"({"type":"MODIFIED","object":{"kind":"Pod","metadata":{"name":"node-a","uid":"zzz"},"spec":{"containers":[]}}})"
      "\n"
      R"({"type":"ADDED","object":{"kind":"Node","metadata":{"name":"node-b","uid":"u-3"}}})"
      "\n"
      R"({"type":"BOOKMARK","object":{"kind":"Node","metadata":{"resourceVersion":"12"}}})"
      "\n"
      R"({"type":"ERROR","object":{"kind":"Status","code":410}})"
      "\n"
      R"({"type":"ERROR","object":{"kind":"Status","code":500,"message":"x"}})"
      "\n"
      R"({"type":"ADDED","object":[1,2]})"
      "\n"
      R"({"type":7})"
      "\n"
      "null\n\n\n");
  return out;
}

TEST(WatchEventFuzzReplayTest, SeedsAndMutations) {
  std::mt19937 rng(11);
  size_t runs = 0;
  for (const auto& seed : Seeds()) {
    Feed(seed);
    for (size_t cut = 0; cut < seed.size(); cut += 13, ++runs) Feed(seed.substr(0, cut));
    for (int i = 0; i < 1500; ++i, ++runs) {
      std::string m = seed;
      size_t pos = rng() % m.size();
      switch (rng() % 5) {
        case 0: m[pos] = static_cast<char>(m[pos] ^ (1u << (rng() % 8))); break;
        case 1: m.erase(pos, 1 + rng() % 8); break;
        case 2: m.insert(pos, m.substr(rng() % m.size(), 1 + rng() % 32)); break;
        case 3: m.insert(pos, "\n"); break;
        default: m[pos] = "{}[]\",:\\ \n"[rng() % 10]; break;
      }
      Feed(m);
    }
  }
  // A line far past the bound, and nesting far past the limit.
  Feed("a" + std::string(20000, 'x') + "\n");
  Feed("a" + std::string(100000, '[') + "\n");
  EXPECT_GT(runs, 3000u);
}

}  // namespace
}  // namespace nvdra::kube
