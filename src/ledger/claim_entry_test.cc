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
  static const std::vector<std::string> pieces = {"",
                                                  "a",
                                                  "gpu-0",
                                                  "default",
                                                  "0f3c-uid",
                                                  "quote\"d",
                                                  "back\\slash",
                                                  "new\nline",
                                                  "\x01",
                                                  "\xc3\xbc",
                                                  "k8s.gpu.nvidia.com/claim=x"};
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
  e.origin = static_cast<ClaimOrigin>(std::uniform_int_distribution<int>(0, 2)(rng));
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

// What a transition does to an entry: some members replaced, the others
// kept. Undo records that json's == calls equal but that dump differently
// (1 and 1.0, 0.0 and -0.0) must not share text.
ClaimEntry Changed(const ClaimEntry& e, std::mt19937& rng) {
  auto one_in = [&](int n) { return std::uniform_int_distribution<int>(1, n)(rng) == 1; };
  ClaimEntry o = RandomEntry(rng);
  ClaimEntry c = e;
  if (one_in(4)) c.allocation = o.allocation;
  if (one_in(4)) c.attempt = o.attempt;
  if (one_in(4)) c.boot_id = o.boot_id;
  if (one_in(4)) c.consumers = o.consumers;
  if (one_in(4)) c.held = o.held;
  if (one_in(4)) c.name = o.name;
  if (one_in(4)) c.ns = o.ns;
  if (one_in(4)) c.origin = o.origin;
  if (one_in(4)) c.prepared = o.prepared;
  if (one_in(4)) c.state = o.state;
  if (one_in(4)) c.unknown_state = o.unknown_state;
  if (one_in(4)) c.uid = o.uid;
  if (one_in(4)) c.undo = o.undo;
  if (one_in(4)) c.updated = o.updated;
  if (one_in(8)) c.extra = {{"aNewerKey", 1}};
  return c;
}

TEST(ClaimEntryTest, PartsOfThePreviousRecordAreReusedByteForByte) {
  std::mt19937 rng(47);
  int reused = 0;
  for (int i = 0; i < 2000; ++i) {
    ClaimEntry before = RandomEntry(rng);
    if (i % 7 == 0) before.undo = {{"n", 1}, {"z", 0.0}};
    EntryText before_text;
    try {
      before_text = EntryJsonParts(before);
    } catch (const nlohmann::json::exception&) {
      continue;
    }
    ClaimEntry e = Changed(before, rng);
    if (i % 7 == 0 && i % 2 == 0) e.undo = {{"n", 1.0}, {"z", 0.0}};
    if (i % 7 == 0 && i % 2 == 1) e.undo = {{"n", 1}, {"z", -0.0}};
    std::string want;
    try {
      want = EntryToJson(e).dump();
    } catch (const nlohmann::json::exception&) {
      continue;
    }
    EntryText text = EntryJsonParts(e, &before, &before_text);
    ASSERT_EQ(text.json, want) << "entry " << i;
    ASSERT_EQ(text.json, EntryJsonText(e));
    if (!text.parts) continue;
    ++reused;
    ASSERT_EQ(text.at[0], 0u);
    ASSERT_EQ(text.at[kEntryTextParts], text.json.size());
    for (size_t k = 0; k < kEntryTextParts; ++k) ASSERT_LE(text.at[k], text.at[k + 1]);
    // Its own parts serve the next record as well.
    ClaimEntry next = Changed(e, rng);
    std::string next_want;
    try {
      next_want = EntryToJson(next).dump();
    } catch (const nlohmann::json::exception&) {
      continue;
    }
    ASSERT_EQ(EntryJsonParts(next, &e, &text).json, next_want) << "entry " << i;
  }
  EXPECT_GT(reused, 600);
}

TEST(ClaimEntryTest, EveryByteThatNeedsEscapingIsFoundAtEveryPosition) {
  // The plain-string check reads eight bytes at a time: each byte that dump
  // escapes (or checks as UTF-8) must be seen wherever it sits.
  for (int c = 0; c < 256; ++c) {
    for (size_t len = 1; len <= 17; ++len) {  // two words and a tail
      for (size_t pos = 0; pos < len; ++pos) {
        ClaimEntry e;
        e.uid = "uid";
        e.name = std::string(len, 'a');
        e.name[pos] = static_cast<char>(c);
        std::string want;
        try {
          want = EntryToJson(e).dump();
        } catch (const nlohmann::json::exception&) {
          ASSERT_THROW(EntryJsonText(e), nlohmann::json::exception) << c << " at " << pos << " of " << len;
          continue;
        }
        ASSERT_EQ(EntryJsonText(e), want) << c << " at " << pos << " of " << len;
      }
    }
  }
}

TEST(ClaimEntryTest, InvalidUtf8IsRefusedAsBefore) {
  ClaimEntry e;
  e.uid = "uid";
  e.name = "bad\xff";
  EXPECT_THROW(EntryToJson(e).dump(), nlohmann::json::exception);
  EXPECT_THROW(EntryJsonText(e), nlohmann::json::exception);
}

// Records as the ledger wrote them before the origin was a field of its own:
// the marker was a key of the undo record. Captured from that version's
// RebuildTransition and ParseLegacyCheckpoint (EntryJsonText of each).
constexpr const char* kRebuiltRecordBeforeOrigin =
    R"({"allocation":[],"bootID":"boot-1","held":["gpu-0"],"name":"gpu-claim","namespace":"default","prepared":[{"cdiDeviceIDs":["k8s.gpu.nvidia.com/claim=0b8e5a2c-1111-4c3e-9d7a-2f6e8b9c0d11-gpu-0"],"device":"gpu-0","pool":"","requests":[]}],"state":"PrepareCompleted","uid":"0b8e5a2c-1111-4c3e-9d7a-2f6e8b9c0d11","undo":{"rebuilt":{"from":"cdi spec","unixMs":1764950400000}},"updatedUnixMs":1764950400000})";
constexpr const char* kImportedRecordBeforeOrigin =
    R"({"allocation":[{"device":"gpu-1","driver":"gpu.nvidia.com","pool":"node-1","request":"gpu"}],"bootID":"boot-1","held":["gpu-1"],"name":"legacy-claim","namespace":"default","prepared":[],"state":"PrepareCompleted","uid":"7f3c9b1e-2222-4a5d-8e6f-3a7b8c9d0e22","undo":{"legacyCheckpoint":{"checkpointState":"PrepareCompleted","name":"legacy-claim","namespace":"default","status":{"allocation":{"devices":{"results":[{"device":"gpu-1","driver":"gpu.nvidia.com","pool":"node-1","request":"gpu"}]}}}},"legacyCheckpointJson":"{\"checkpointState\":\"PrepareCompleted\",\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"gpu\",\"driver\":\"gpu.nvidia.com\",\"pool\":\"node-1\",\"device\":\"gpu-1\"}]}}},\"name\":\"legacy-claim\",\"namespace\":\"default\"}"},"updatedUnixMs":0})";

ClaimEntry Decode(const std::string& text) {
  auto e = EntryFromJson(ParsePersistedJson(text));
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? *e : ClaimEntry{};
}

TEST(ClaimEntryTest, RecordsWrittenBeforeTheOriginFieldDecodeToTheirOrigin) {
  ClaimEntry rebuilt = Decode(kRebuiltRecordBeforeOrigin);
  EXPECT_EQ(rebuilt.origin, ClaimOrigin::kRebuilt);
  EXPECT_TRUE(rebuilt.extra.empty()) << rebuilt.extra.dump();
  ClaimEntry imported = Decode(kImportedRecordBeforeOrigin);
  EXPECT_EQ(imported.origin, ClaimOrigin::kLegacyCheckpoint);
  // The undo records stay as they were: the export to the Go driver reads
  // the checkpoint's exact text from there.
  EXPECT_EQ(
      imported.undo.value("legacyCheckpointJson", ""),
      R"({"checkpointState":"PrepareCompleted","status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.nvidia.com","pool":"node-1","device":"gpu-1"}]}}},"name":"legacy-claim","namespace":"default"})");
  // Written again, each names its origin, and reads back the same.
  for (const ClaimEntry* e : {&rebuilt, &imported}) {
    const std::string text = EntryJsonText(*e);
    EXPECT_NE(text.find(std::string("\"origin\":\"") + ClaimOriginName(e->origin) + "\""), std::string::npos) << text;
    ClaimEntry again = Decode(text);
    EXPECT_EQ(again.origin, e->origin);
    EXPECT_EQ(again.undo, e->undo);
    EXPECT_EQ(EntryJsonText(again), text);
  }
}

TEST(ClaimEntryTest, AnEntryOfThePluginsOwnPrepareNamesNoOrigin) {
  ClaimEntry e = Decode(kRebuiltRecordBeforeOrigin);
  e.origin = ClaimOrigin::kPrepare;
  e.undo = {{"devices", {"gpu-0"}}};
  const std::string text = EntryJsonText(e);
  EXPECT_EQ(text.find("\"origin\""), std::string::npos) << text;
  EXPECT_EQ(Decode(text).origin, ClaimOrigin::kPrepare);
}

TEST(ClaimEntryTest, AnOriginOfANewerVersionIsKeptAndWrittenBack) {
  std::string text = kRebuiltRecordBeforeOrigin;
  text.replace(text.find("\"prepared\""), 0, R"("origin":"someFutureOrigin",)");
  ClaimEntry e = Decode(text);
  EXPECT_EQ(e.origin, ClaimOrigin::kPrepare) << "an origin this version does not know is no marker it acts on";
  EXPECT_EQ(e.extra.value("origin", ""), "someFutureOrigin");
  EXPECT_NE(EntryJsonText(e).find(R"("origin":"someFutureOrigin")"), std::string::npos);
}

}  // namespace
}  // namespace nvdra::ledger
