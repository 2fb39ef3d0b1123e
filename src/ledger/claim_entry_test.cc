// EntryJsonText against the document it stands in for: a record's bytes
// are what the ledger's checksum covers and what older and newer versions
// read, so the text written straight from the entry must be the document's
// dump byte for byte, whichever path writes it.
#include "ledger/claim_entry.h"

#include <gtest/gtest.h>

#include <random>

namespace nvdra::ledger {
namespace {

std::string RandomString(std::mt19937& rng) {
  static const std::vector<std::string> pieces = {"", "a", "gpu-0", "default", "0f3c-uid", "quote\"d", "back\\slash",
                                                  "new\nline", "\x01", "\xc3\xbc", "k8s.gpu.nvidia.com/claim=x"};
  std::string s;
  for (int i = std::uniform_int_distribution<int>(0, 3)(rng); i > 0; --i) {
    s += pieces[std::uniform_int_distribution<size_t>(0, pieces.size() - 1)(rng)];
  }
  return s;
}

std::vector<std::string> RandomStrings(std::mt19937& rng) {
  std::vector<std::string> v;
  for (int i = std::uniform_int_distribution<int>(0, 3)(rng); i > 0; --i) v.push_back(RandomString(rng));
  return v;
}

ClaimEntry RandomEntry(std::mt19937& rng) {
  auto coin = [&] { return std::uniform_int_distribution<int>(0, 1)(rng) == 1; };
  ClaimEntry e;
  e.uid = RandomString(rng);
  e.ns = RandomString(rng);
  e.name = RandomString(rng);
  e.state = static_cast<ClaimState>(std::uniform_int_distribution<int>(0, 3)(rng));
  if (coin() && coin()) e.unknown_state = "SomeFutureState";
  for (int i = std::uniform_int_distribution<int>(0, 3)(rng); i > 0; --i) {
    AllocatedDevice d{RandomString(rng), RandomString(rng), RandomString(rng), RandomString(rng)};
    d.admin_access = coin();
    if (coin()) d.share_id = RandomString(rng);
    e.allocation.push_back(d);
  }
  e.held = RandomStrings(rng);
  e.consumers = RandomStrings(rng);
  e.attempt = RandomString(rng);
  for (int i = std::uniform_int_distribution<int>(0, 3)(rng); i > 0; --i) {
    model::PreparedDevice p;
    p.requests = RandomStrings(rng);
    p.pool = RandomString(rng);
    p.device = RandomString(rng);
    p.cdi_device_ids = RandomStrings(rng);
    if (coin()) p.share_id = RandomString(rng);
    e.prepared.push_back(p);
  }
  if (coin()) e.undo = {{"devices", RandomStrings(rng)}, {"v", 1}, {"x", {{"y", RandomString(rng)}}}};
  e.boot_id = RandomString(rng);
  e.updated = std::chrono::system_clock::time_point(
      std::chrono::milliseconds(std::uniform_int_distribution<int64_t>(-5, int64_t{1} << 42)(rng)));
  return e;
}

TEST(ClaimEntryTest, TextIsTheDocumentsDumpForRandomEntries) {
  std::mt19937 rng(20261205);
  for (int i = 0; i < 2000; ++i) {
    ClaimEntry e = RandomEntry(rng);
    // A third take the document's path: keys of a newer version, shares,
    // consumed capacity.
    int pick = std::uniform_int_distribution<int>(0, 8)(rng);
    if (pick == 0) e.extra = {{"aNewerKey", RandomString(rng)}, {"zLast", 2}};
    if (pick == 1 && !e.allocation.empty()) e.allocation[0].consumed_capacity = {{"memory", "4Gi"}};
    if (pick == 2) e.shares.push_back(HeldShare{});
    std::string want;
    try {
      want = EntryToJson(e).dump();
    } catch (const nlohmann::json::exception&) {
      EXPECT_THROW(EntryJsonText(e), nlohmann::json::exception) << "entry " << i;
      continue;
    }
    ASSERT_EQ(EntryJsonText(e), want) << "entry " << i;
  }
}

TEST(ClaimEntryTest, InvalidUtf8IsRefusedAsBefore) {
  ClaimEntry e;
  e.uid = "uid";
  e.name = "bad\xff";
  EXPECT_THROW(EntryToJson(e).dump(), nlohmann::json::exception);
  EXPECT_THROW(EntryJsonText(e), nlohmann::json::exception);
}

}  // namespace
}  // namespace nvdra::ledger
