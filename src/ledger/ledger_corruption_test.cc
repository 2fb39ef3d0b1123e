// Corruption tests (LevelDB corruption_test style): a small ledger cut at
// every byte boundary and with every byte flipped must open, keep exactly the
// records that verify, leave a clean file behind, and never crash.
#include <gtest/gtest.h>

#include <set>

#include <spdlog/spdlog.h>

#include "ledger/claim_ledger.h"
#include "ledger/ledger_inspector.h"
#include "ledger/ledger_state.h"
#include "ledger/ledger_test_util.h"
#include "ledger/log_format.h"
#include "util/file_util.h"

namespace nvdra::ledger {
namespace {

using testing::Prepared;
using testing::Request;

// Thousands of opens: use memory-backed storage where the machine has it so
// fsync costs nothing; the logic under test is the same.
std::string FastTmp() { return ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : ""; }

class ScratchInShm {
 public:
  ScratchInShm() : dir_(std::make_unique<testing::ScratchDir>(FastTmp())) {}
  const std::string& path() const { return dir_->path(); }

 private:
  std::unique_ptr<testing::ScratchDir> dir_;
};

class LedgerCorruptionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    spdlog::set_level(spdlog::level::off);  // thousands of expected damage reports
    ScratchInShm dir;
    LedgerOptions o;
    o.dir = dir.path();
    o.boot_id = "boot-1";
    auto l = std::move(ClaimLedger::Open(o)).value();
    ASSERT_TRUE(l->BeginPrepare(Request("uid-a", {"gpu-0"})).ok());
    ASSERT_TRUE(l->CompletePrepare("uid-a", Prepared("uid-a", {"gpu-0"}), nullptr).ok());
    ASSERT_TRUE(l->BeginPrepare(Request("uid-b", {"gpu-1"})).ok());
    ASSERT_TRUE(l->BeginUnprepare("uid-a").ok());
    ASSERT_TRUE(l->FinishUnprepare("uid-a").ok());
    ASSERT_TRUE(l->BeginPrepare(Request("uid-c", {"gpu-0"})).ok());
    l.reset();
    *good_ = *ReadFileToString(JoinPath(dir.path(), kLogFileName));
  }

  // uid -> state after applying the records that lie wholly in bytes [0, n).
  static std::map<std::string, ClaimState> ExpectedAt(size_t n) {
    DecodedLog log = DecodeLog(*good_);
    LedgerState s;
    for (const auto& r : log.body.records) {
      if (r.offset + r.size <= n) (void)s.Apply(r);
    }
    std::map<std::string, ClaimState> out;
    for (const auto& [uid, e] : s.entries()) out[uid] = e.state;
    return out;
  }

  struct Opened {
    std::map<std::string, ClaimState> states;
    bool clean = false;
  };

  Opened OpenBytes(const std::string& bytes) {
    ScratchInShm dir;
    EXPECT_TRUE(WriteFileAtomically(JoinPath(dir.path(), kLogFileName), bytes, 0600, false).ok());
    LedgerOptions o;
    o.dir = dir.path();
    o.boot_id = "boot-1";
    auto l = ClaimLedger::Open(o);
    Opened out;
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    if (!l.ok()) return out;
    out.clean = (*l)->report().clean();
    auto list = (*l)->List();
    EXPECT_TRUE(list.ok());
    for (const auto& e : *list) out.states[e.uid] = e.state;
    // Whatever was found, what is left behind verifies and can be written to.
    auto insp = InspectLedger(dir.path());
    EXPECT_TRUE(insp.ok() && !insp->damaged());
    EXPECT_TRUE((*l)->BeginPrepare(Request("uid-new", {"gpu-9"})).ok());
    return out;
  }

  static std::string* good_;
};

std::string* LedgerCorruptionTest::good_ = new std::string();

TEST_F(LedgerCorruptionTest, TruncationAtEveryByteKeepsEveryWholeRecord) {
  DecodedLog log = DecodeLog(*good_);
  ASSERT_GE(log.body.records.size(), 7u);
  std::set<uint64_t> boundaries = {0};
  for (const auto& r : log.body.records) boundaries.insert(r.offset + r.size);
  for (size_t n = 0; n <= good_->size(); ++n) {
    SCOPED_TRACE("truncated to " + std::to_string(n) + " bytes");
    Opened o = OpenBytes(good_->substr(0, n));
    if (n < kFileHeaderSize) {
      EXPECT_TRUE(o.states.empty());
      continue;
    }
    EXPECT_EQ(o.states, ExpectedAt(n));
    // A cut that falls between records loses nothing and reports nothing.
    EXPECT_EQ(o.clean, boundaries.count(n) > 0 || n == kFileHeaderSize);
  }
}

TEST_F(LedgerCorruptionTest, FlippedByteAnywhereOpensAndKeepsOnlyVerifiedRecords) {
  // Every (uid, state) pair ever written; a flip can lose records, never invent one.
  DecodedLog log = DecodeLog(*good_);
  std::set<std::pair<std::string, ClaimState>> written;
  for (const auto& r : log.body.records) {
    LedgerState s;
    (void)s.Apply(r);
    for (const auto& [uid, e] : s.entries()) written.insert({uid, e.state});
  }
  for (size_t i = 0; i < good_->size(); ++i) {
    SCOPED_TRACE("byte " + std::to_string(i) + " flipped");
    std::string bad = *good_;
    bad[i] = static_cast<char>(bad[i] ^ (i % 2 ? 0xFF : 0x10));
    Opened o = OpenBytes(bad);
    EXPECT_FALSE(o.clean);
    for (const auto& [uid, st] : o.states) EXPECT_TRUE(written.count({uid, st})) << uid;
  }
}

TEST_F(LedgerCorruptionTest, GarbageAppendedAfterValidRecordsIsQuarantined) {
  std::string bad = *good_ + std::string(100, '\x5a');
  Opened o = OpenBytes(bad);
  EXPECT_FALSE(o.clean);
  EXPECT_EQ(o.states, ExpectedAt(good_->size()));
}

}  // namespace
}  // namespace nvdra::ledger
