// Runs the decoder fuzz target over seed ledgers and deterministic mutations
// of them (truncations, bit flips, spliced and duplicated ranges), so the
// target runs in every CI build even without clang/libFuzzer.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ledger/claim_entry.h"
#include "ledger/log_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace nvdra::ledger {
namespace {

std::string Seed() {
  std::string s = EncodeFileHeader();
  s += EncodeRecord(static_cast<uint8_t>(RecordType::kMeta), R"({"generation":3,"writer":"nvdra"})");
  for (int i = 0; i < 4; ++i) {
    ClaimEntry e;
    e.uid = "uid-" + std::to_string(i);
    e.state = static_cast<ClaimState>(i);
    e.allocation = {{"req", "gpu.nvidia.com", "node", "gpu-" + std::to_string(i), i == 2, ""}};
    e.held = {"gpu-" + std::to_string(i)};
    e.prepared = {{{"req"}, "node", "gpu-" + std::to_string(i), {"k8s.gpu.nvidia.com/claim=x"}, ""}};
    e.undo = {{"k", i}};
    s += EncodeRecord(static_cast<uint8_t>(RecordType::kEntry), EntryToJson(e).dump());
  }
  s += EncodeRecord(77, "future");
  s += EncodeRecord(static_cast<uint8_t>(RecordType::kEntry), R"({"uid":"x","state":"Exploded"})");
  s += EncodeRecord(static_cast<uint8_t>(RecordType::kEntry), "[1,2");
  return s;
}

void Feed(const std::string& s) { LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }

TEST(LedgerDecoderReplayTest, SeedsAndTruncations) {
  std::string seed = Seed();
  for (size_t n = 0; n <= seed.size(); ++n) Feed(seed.substr(0, n));
  Feed(EncodeFileHeader(2) + seed.substr(kFileHeaderSize));
  Feed(std::string(64, '\0'));
  Feed(std::string(64, '\xff'));
  SUCCEED();
}

TEST(LedgerDecoderReplayTest, DeterministicMutations) {
  std::string seed = Seed();
  std::mt19937 rng(12345);
  for (int i = 0; i < 20000; ++i) {
    std::string s = seed;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits && !s.empty(); ++k) {
      size_t at = rng() % s.size();
      switch (rng() % 4) {
        case 0: s[at] = static_cast<char>(s[at] ^ (1u << (rng() % 8))); break;
        case 1: s.erase(at, 1 + rng() % 16); break;
        case 2: s.insert(at, s.substr(rng() % s.size(), 1 + rng() % 32)); break;
        case 3: s.resize(at); break;
      }
    }
    Feed(s);
  }
  SUCCEED();
}

}  // namespace
}  // namespace nvdra::ledger
