#include "ledger/claim_ledger.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "ledger/fault_injection_env.h"
#include "ledger/ledger_inspector.h"
#include "ledger/ledger_test_util.h"
#include "ledger/log_format.h"
#include "util/failpoint.h"
#include "util/file_util.h"

namespace nvdra::ledger {
namespace {

using namespace std::chrono_literals;
using testing::Prepared;
using testing::Request;
using testing::ScratchDir;

class ClaimLedgerTest : public ::testing::Test {
 protected:
  void TearDown() override { FailPoints::Process().Clear(); }

  LedgerOptions Options(const std::string& boot = "boot-1") {
    LedgerOptions o;
    o.dir = dir_.path();
    o.boot_id = boot;
    o.clock = &clock_;
    o.tombstone_ttl = 60s;
    o.lock_timeout = 5s;
    return o;
  }
  std::unique_ptr<ClaimLedger> OpenLedger(const std::string& boot = "boot-1") {
    auto l = ClaimLedger::Open(Options(boot));
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    return l.ok() ? std::move(l).value() : nullptr;
  }
  std::string LogPath() const { return JoinPath(dir_.path(), kLogFileName); }
  ClaimEntry MustGet(ClaimLedger& l, const std::string& uid) {
    auto e = l.Get(uid);
    EXPECT_TRUE(e.ok() && e->has_value()) << uid;
    return e.ok() && e->has_value() ? **e : ClaimEntry{};
  }
  void PrepareFully(ClaimLedger& l, const std::string& uid, const std::vector<std::string>& devs) {
    auto b = l.BeginPrepare(Request(uid, devs));
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    ASSERT_TRUE(l.CompletePrepare(uid, Prepared(uid, devs), {{"done", true}}).ok());
  }

  ScratchDir dir_;
  FakeClock clock_;
};

TEST_F(ClaimLedgerTest, FreshBeginRecordsPrepareStartedDurably) {
  auto l = OpenLedger();
  EXPECT_TRUE(l->report().created);
  auto b = l->BeginPrepare(Request("uid-a", {"gpu-0", "gpu-1"}));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->outcome, BeginOutcome::kStarted);
  l.reset();
  auto again = OpenLedger();
  ClaimEntry e = MustGet(*again, "uid-a");
  EXPECT_EQ(e.state, ClaimState::kPrepareStarted);
  EXPECT_EQ(e.ns, "default");
  EXPECT_EQ(e.held, (std::vector<std::string>{"gpu-0", "gpu-1"}));
  EXPECT_EQ(e.undo["devices"][1], "gpu-1");
  EXPECT_EQ(e.boot_id, "boot-1");
}

// PeekState answers from memory while nobody else appended, and reads the
// file again once another process (here a second ledger on the directory)
// did: it never misses a record that was appended before it was called.
TEST_F(ClaimLedgerTest, PeekStateSeesWhatAnotherProcessAppended) {
  auto l = OpenLedger();
  auto other = OpenLedger();
  auto state = [](ClaimLedger& ledger, const std::string& uid) {
    auto s = ledger.PeekState(uid);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : std::nullopt;
  };
  EXPECT_EQ(state(*l, "uid-a"), std::nullopt);
  PrepareFully(*other, "uid-a", {"gpu-0"});
  EXPECT_EQ(state(*l, "uid-a"), ClaimState::kPrepareCompleted);
  ASSERT_TRUE(l->BeginUnprepare("uid-a").ok());
  EXPECT_EQ(state(*l, "uid-a"), ClaimState::kUnprepareStarted);
  EXPECT_EQ(state(*other, "uid-a"), ClaimState::kUnprepareStarted);
  ASSERT_TRUE(other->FinishUnprepare("uid-a").ok());
  EXPECT_EQ(state(*l, "uid-a"), ClaimState::kTombstone);
}

TEST_F(ClaimLedgerTest, CompletedClaimIsReturnedAsIsAndNothingIsWritten) {
  auto l = OpenLedger();
  PrepareFully(*l, "uid-a", {"gpu-0"});
  uint64_t size = testing::FileSize(LogPath());
  auto b = l->BeginPrepare(Request("uid-a", {"gpu-0"}));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->outcome, BeginOutcome::kAlreadyPrepared);
  EXPECT_EQ(b->entry.prepared, Prepared("uid-a", {"gpu-0"}));
  EXPECT_EQ(testing::FileSize(LogPath()), size);
  EXPECT_EQ(MustGet(*l, "uid-a").state, ClaimState::kPrepareCompleted);
  // A second complete with the same devices is an idempotent no-op.
  EXPECT_TRUE(l->CompletePrepare("uid-a", Prepared("uid-a", {"gpu-0"}), nullptr).ok());
  EXPECT_EQ(testing::FileSize(LogPath()), size);
}

TEST_F(ClaimLedgerTest, RepeatedPrepareReturnsByteIdenticalDevicesAfterReopen) {
  auto l = OpenLedger();
  PrepareFully(*l, "uid-a", {"gpu-1", "gpu-0"});
  auto first = l->BeginPrepare(Request("uid-a", {"gpu-1", "gpu-0"}));
  l.reset();
  auto l2 = OpenLedger();
  auto second = l2->BeginPrepare(Request("uid-a", {"gpu-1", "gpu-0"}));
  ASSERT_TRUE(first.ok() && second.ok());
  nlohmann::json a = EntryToJson(first->entry), b = EntryToJson(second->entry);
  EXPECT_EQ(a["prepared"].dump(), b["prepared"].dump());
}

TEST_F(ClaimLedgerTest, ConflictNamesDeviceAndHolder) {
  auto l = OpenLedger();
  PrepareFully(*l, "uid-a", {"gpu-0"});
  auto b = l->BeginPrepare(Request("uid-b", {"gpu-1", "gpu-0"}));
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kConflict);
  EXPECT_EQ(b.status().message(), "gpu-0 already allocated by claim uid-a (according to checkpoint)");
  EXPECT_FALSE(l->Get("uid-b")->has_value());
  auto holder = l->HolderOf("gpu-0");
  ASSERT_TRUE(holder.ok() && holder->has_value());
  EXPECT_EQ((*holder)->uid, "uid-a");
}

// The kind words the refusal (its codec); the ledger hands it the resource,
// the holder and what the refused claim requested, and names a requested
// device held twice before a resource it shares with another device.
TEST_F(ClaimLedgerTest, ConflictIsWordedByTheKindsCodec) {
  class WordingCodec final : public KindCodec {
   public:
    std::string driver_name() const override { return "test.example.com"; }
    std::vector<std::string> HeldResources(const std::string& device,
                                           const std::vector<nlohmann::json>&) const override {
      return {device};
    }
    std::optional<std::string> UpstreamPreparedDevices(const ClaimEntry&) const override { return std::nullopt; }
    std::string HeldByAnotherClaim(const std::string& resource, const std::string& holder,
                                   const std::vector<std::string>& requested) const override {
      return resource + " of [" + fmt::format("{}", fmt::join(requested, " ")) + "] held by " + holder;
    }
  } codec;
  LedgerOptions o = Options();
  o.codec = &codec;
  auto l = ClaimLedger::Open(o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  auto a = Request("uid-a", {"gpu-0"});
  a.held = std::vector<std::string>{"gpu-0", "a-shared-slice"};
  ASSERT_TRUE((*l)->BeginPrepare(a).ok());
  auto b = Request("uid-b", {"gpu-1", "gpu-0"});
  b.held = std::vector<std::string>{"a-shared-slice", "gpu-0", "gpu-1"};
  auto refused = (*l)->BeginPrepare(b);
  ASSERT_EQ(refused.status().code(), StatusCode::kConflict);
  EXPECT_EQ(refused.status().message(), "gpu-0 of [gpu-0 gpu-1] held by uid-a");
  // A shared resource alone: the codec gets it, with the requested devices.
  auto c = Request("uid-c", {"gpu-2"});
  c.held = std::vector<std::string>{"a-shared-slice", "gpu-2"};
  EXPECT_EQ((*l)->BeginPrepare(c).status().message(), "a-shared-slice of [gpu-2] held by uid-a");
}

TEST_F(ClaimLedgerTest, PrepareStartedHolderAlsoConflicts) {
  auto l = OpenLedger();
  ASSERT_TRUE(l->BeginPrepare(Request("uid-a", {"gpu-3"})).ok());
  auto b = l->BeginPrepare(Request("uid-b", {"gpu-3"}));
  EXPECT_EQ(b.status().code(), StatusCode::kConflict);
}

TEST_F(ClaimLedgerTest, AdminAccessIsExempt) {
  auto l = OpenLedger();
  PrepareFully(*l, "uid-a", {"gpu-0"});
  auto b = l->BeginPrepare(Request("uid-admin", {"gpu-0"}, /*admin=*/true));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(b->entry.held.empty());
  // And an admin claim holds nothing another claim could conflict with.
  ASSERT_TRUE(l->BeginUnprepare("uid-a").ok());
  ASSERT_TRUE(l->FinishUnprepare("uid-a").ok());
  EXPECT_TRUE(l->BeginPrepare(Request("uid-c", {"gpu-0"})).ok());
}

TEST_F(ClaimLedgerTest, ExplicitHeldResourcesConflict) {
  auto l = OpenLedger();
  auto r1 = Request("uid-a", {"channel-0"});
  r1.held = std::vector<std::string>{"channel 3"};
  ASSERT_TRUE(l->BeginPrepare(r1).ok());
  auto r2 = Request("uid-b", {"channel-1"});
  r2.held = std::vector<std::string>{"channel 3"};
  auto b = l->BeginPrepare(r2);
  EXPECT_EQ(b.status().message(), "channel 3 already allocated by claim uid-a (according to checkpoint)");
}

TEST_F(ClaimLedgerTest, DifferentAllocationForKnownUidIsRefused) {
  auto l = OpenLedger();
  PrepareFully(*l, "uid-a", {"gpu-0"});
  auto b = l->BeginPrepare(Request("uid-a", {"gpu-1"}));
  EXPECT_EQ(b.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(b.status().message().find("different allocation"), std::string::npos);
  EXPECT_EQ(MustGet(*l, "uid-a").allocation[0].device, "gpu-0");
}

TEST_F(ClaimLedgerTest, RetryOfStartedClaimReturnsPreviousUndo) {
  auto l = OpenLedger();
  auto first = Request("uid-a", {"gpu-0"});
  first.undo = {{"step", 2}};
  ASSERT_TRUE(l->BeginPrepare(first).ok());
  auto b = l->BeginPrepare(Request("uid-a", {"gpu-0"}));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->outcome, BeginOutcome::kRetry);
  EXPECT_EQ(b->entry.undo["step"], 2);
}

TEST_F(ClaimLedgerTest, InvalidUidIsRefused) {
  auto l = OpenLedger();
  EXPECT_EQ(l->BeginPrepare(Request("../x", {"gpu-0"})).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ClaimLedgerTest, UnprepareOfUnknownClaimSucceeds) {
  auto l = OpenLedger();
  auto u = l->BeginUnprepare("nobody");
  ASSERT_TRUE(u.ok());
  EXPECT_FALSE(u->has_value());
  EXPECT_TRUE(l->FinishUnprepare("nobody").ok());
}

TEST_F(ClaimLedgerTest, UnprepareMarksThenTombstonesAndFreesDevices) {
  auto l = OpenLedger();
  PrepareFully(*l, "uid-a", {"gpu-0"});
  auto u = l->BeginUnprepare("uid-a");
  ASSERT_TRUE(u.ok() && u->has_value());
  EXPECT_EQ((*u)->state, ClaimState::kUnprepareStarted);
  EXPECT_EQ((*u)->undo["done"], true);
  // Still held while the device kind undoes.
  EXPECT_EQ(l->BeginPrepare(Request("uid-b", {"gpu-0"})).status().code(), StatusCode::kConflict);
  // Finishing requires UnprepareStarted.
  PrepareFully(*l, "uid-c", {"gpu-5"});
  EXPECT_EQ(l->FinishUnprepare("uid-c").code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(l->FinishUnprepare("uid-a").ok());
  EXPECT_EQ(MustGet(*l, "uid-a").state, ClaimState::kTombstone);
  EXPECT_TRUE(l->BeginPrepare(Request("uid-b", {"gpu-0"})).ok());
  // A repeated unprepare is a no-op.
  auto again = l->BeginUnprepare("uid-a");
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->has_value());
}

TEST_F(ClaimLedgerTest, PrepareDuringUnprepareIsRefused) {
  auto l = OpenLedger();
  PrepareFully(*l, "uid-a", {"gpu-0"});
  ASSERT_TRUE(l->BeginUnprepare("uid-a").ok());
  auto b = l->BeginPrepare(Request("uid-a", {"gpu-0"}));
  EXPECT_EQ(b.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(l->CompletePrepare("uid-a", Prepared("uid-a", {"gpu-0"}), nullptr).code(), StatusCode::kFailedPrecondition);
}

TEST_F(ClaimLedgerTest, TombstoneRefusesLatePrepareUntilItExpires) {
  auto l = OpenLedger();
  PrepareFully(*l, "uid-a", {"gpu-0"});
  ASSERT_TRUE(l->BeginUnprepare("uid-a").ok());
  ASSERT_TRUE(l->FinishUnprepare("uid-a").ok());
  auto late = l->BeginPrepare(Request("uid-a", {"gpu-0"}));
  EXPECT_EQ(late.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(late.status().message().find("resurrect"), std::string::npos);
  // Survives a restart.
  l.reset();
  l = OpenLedger();
  EXPECT_EQ(l->BeginPrepare(Request("uid-a", {"gpu-0"})).status().code(), StatusCode::kFailedPrecondition);
  // A new allocation of the same UID is not a late retry.
  auto other = l->BeginPrepare(Request("uid-a", {"gpu-1"}));
  EXPECT_TRUE(other.ok()) << other.status().ToString();
}

TEST_F(ClaimLedgerTest, TombstoneRefusesOnlyAClaimReservedForNobody) {
  auto l = OpenLedger();
  auto first = Request("uid-a", {"gpu-0"});
  first.consumers = {"pod-1", "pod-2"};
  ASSERT_TRUE(l->BeginPrepare(first).ok());
  ASSERT_TRUE(l->CompletePrepare("uid-a", Prepared("uid-a", {"gpu-0"}), nullptr).ok());
  ASSERT_TRUE(l->BeginUnprepare("uid-a").ok());
  ASSERT_TRUE(l->FinishUnprepare("uid-a").ok());
  EXPECT_EQ(MustGet(*l, "uid-a").consumers, (std::vector<std::string>{"pod-1", "pod-2"}));
  // Reserved for nobody now: a late retry for a pod that is gone.
  auto late = l->BeginPrepare(Request("uid-a", {"gpu-0"}));
  EXPECT_EQ(late.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(late.status().message().find("reserved for no pod"), std::string::npos);
  // Pod 1 ended and pod 2 starts: the kubelet prepares the claim for it,
  // whether or not reservedFor has dropped pod 1 yet.
  for (auto consumers : {std::vector<std::string>{"pod-2"}, std::vector<std::string>{"pod-1", "pod-2"}}) {
    auto next = Request("uid-a", {"gpu-0"});
    next.consumers = consumers;
    auto r = l->BeginPrepare(next);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->outcome, BeginOutcome::kStarted);
    EXPECT_EQ(r->entry.consumers, consumers);
    ASSERT_TRUE(l->CompletePrepare("uid-a", Prepared("uid-a", {"gpu-0"}), nullptr, r->entry.attempt).ok());
    ASSERT_TRUE(l->BeginUnprepare("uid-a").ok());
    ASSERT_TRUE(l->FinishUnprepare("uid-a").ok());
  }
}

TEST_F(ClaimLedgerTest, CompletePrepareNeedsTheAttemptThatBeganIt) {
  auto l = OpenLedger();
  auto req = Request("uid-a", {"gpu-0"});
  req.consumers = {"pod-1"};
  auto first = l->BeginPrepare(req);
  ASSERT_TRUE(first.ok());
  ASSERT_FALSE(first->entry.attempt.empty());
  // The prepare is begun again (a retry): the first attempt is superseded.
  auto second = l->BeginPrepare(req);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->outcome, BeginOutcome::kRetry);
  EXPECT_NE(second->entry.attempt, first->entry.attempt);
  auto stale = l->CompletePrepare("uid-a", Prepared("uid-a", {"gpu-0"}), nullptr, first->entry.attempt);
  EXPECT_EQ(stale.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(stale.message().find("superseded"), std::string::npos);
  EXPECT_EQ(MustGet(*l, "uid-a").state, ClaimState::kPrepareStarted);
  // Unprepared and prepared afresh in between: the second attempt is stale too.
  ASSERT_TRUE(l->BeginUnprepare("uid-a").ok());
  ASSERT_TRUE(l->FinishUnprepare("uid-a").ok());
  auto third = l->BeginPrepare(req);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(l->CompletePrepare("uid-a", Prepared("uid-a", {"gpu-0"}), nullptr, second->entry.attempt).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_TRUE(l->CompletePrepare("uid-a", Prepared("uid-a", {"gpu-0"}), nullptr, third->entry.attempt).ok());
  // The attempt survives a reopen (another process completes it).
  l.reset();
  l = OpenLedger();
  EXPECT_EQ(MustGet(*l, "uid-a").attempt, third->entry.attempt);
}

TEST_F(ClaimLedgerTest, ListHeldLeavesTombstonesOut) {
  auto l = OpenLedger();
  for (int i = 0; i < 5; ++i) {
    std::string uid = "uid-" + std::to_string(i);
    PrepareFully(*l, uid, {"gpu-" + std::to_string(i)});
    ASSERT_TRUE(l->BeginUnprepare(uid).ok());
    ASSERT_TRUE(l->FinishUnprepare(uid).ok());
  }
  PrepareFully(*l, "uid-held", {"gpu-6"});
  ASSERT_TRUE(l->BeginPrepare(Request("uid-starting", {"gpu-7"})).ok());
  PrepareFully(*l, "uid-leaving", {"gpu-5"});
  ASSERT_TRUE(l->BeginUnprepare("uid-leaving").ok());
  EXPECT_EQ(l->List()->size(), 8u);
  auto held = l->ListHeld();
  ASSERT_TRUE(held.ok());
  std::vector<std::string> uids;
  for (const auto& e : *held) uids.push_back(e.uid);
  std::sort(uids.begin(), uids.end());
  EXPECT_EQ(uids, (std::vector<std::string>{"uid-held", "uid-leaving", "uid-starting"}));
}

TEST_F(ClaimLedgerTest, TombstoneExpiresAndIsCollected) {
  auto l = OpenLedger();
  for (int i = 0; i < 50; ++i) {
    std::string uid = "uid-" + std::to_string(i);
    PrepareFully(*l, uid, {"gpu-" + std::to_string(i)});
    ASSERT_TRUE(l->BeginUnprepare(uid).ok());
    ASSERT_TRUE(l->FinishUnprepare(uid).ok());
  }
  EXPECT_EQ(l->List()->size(), 50u);
  clock_.Advance(61s);
  EXPECT_TRUE(l->List()->empty());
  EXPECT_TRUE(l->BeginPrepare(Request("uid-0", {"gpu-0"})).ok());
  ASSERT_TRUE(l->CollectGarbage(/*force_compaction=*/true).ok());
  auto insp = InspectLedger(dir_.path());
  ASSERT_TRUE(insp.ok());
  EXPECT_EQ(insp->entries.size(), 1u);  // only the live claim is left on disk
  EXPECT_LT(insp->file_size, 1024u);
}

// Counts() against a recount of every entry (List hides expired tombstones,
// so callers compare while none has expired, or after they were dropped).
void ExpectCountsMatchEntries(ClaimLedger& l, const std::string& when) {
  auto entries = l.List();  // also catches up with other writers
  ASSERT_TRUE(entries.ok());
  LedgerCounts want;
  for (const auto& e : *entries) {
    want.claims[static_cast<size_t>(e.state)]++;
    if (e.state != ClaimState::kPrepareCompleted) continue;
    for (const auto& d : e.prepared) want.prepared_devices[d.device]++;
  }
  LedgerCounts got = l.Counts();
  EXPECT_EQ(got.claims, want.claims) << when;
  EXPECT_EQ(got.prepared_devices, want.prepared_devices) << when;
  EXPECT_EQ(got.bytes, testing::FileSize(JoinPath(l.dir(), kLogFileName))) << when;
}

TEST_F(ClaimLedgerTest, CountsFollowEveryTransitionReopenCompactionAndOtherWriters) {
  auto l = OpenLedger();
  ExpectCountsMatchEntries(*l, "empty");
  PrepareFully(*l, "a", {"gpu-0", "gpu-1"});
  PrepareFully(*l, "b", {"gpu-2"});
  ASSERT_TRUE(l->BeginPrepare(Request("c", {"gpu-3"})).ok());
  EXPECT_EQ(l->Counts().prepared_devices.at("gpu-1"), 1);
  EXPECT_EQ(l->Counts().claims[static_cast<size_t>(ClaimState::kPrepareStarted)], 1);
  ExpectCountsMatchEntries(*l, "prepared");
  ASSERT_TRUE(l->BeginUnprepare("a").ok());
  ExpectCountsMatchEntries(*l, "unprepare started");
  EXPECT_EQ(l->Counts().prepared_devices.count("gpu-0"), 0u);
  ASSERT_TRUE(l->FinishUnprepare("a").ok());
  ExpectCountsMatchEntries(*l, "tombstone");
  // The same claim prepared again after its tombstone, by a pod reserving it.
  auto again = Request("a", {"gpu-0", "gpu-1"});
  again.consumers = {"pod-2"};
  ASSERT_TRUE(l->BeginPrepare(again).ok());
  ASSERT_TRUE(l->CompletePrepare("a", Prepared("a", {"gpu-0", "gpu-1"}), {}).ok());
  ExpectCountsMatchEntries(*l, "prepared again");

  // Another writer's records are counted once they are read.
  auto other = OpenLedger();
  PrepareFully(*other, "d", {"gpu-4"});
  ASSERT_TRUE(other->BeginUnprepare("b").ok());
  ASSERT_TRUE(other->FinishUnprepare("b").ok());
  ExpectCountsMatchEntries(*l, "after another writer");
  EXPECT_EQ(l->Counts().prepared_devices.count("gpu-2"), 0u);
  EXPECT_EQ(l->Counts().prepared_devices.at("gpu-4"), 1);

  ASSERT_TRUE(l->CollectGarbage(/*force_compaction=*/true).ok());
  ExpectCountsMatchEntries(*l, "after compaction");
  ExpectCountsMatchEntries(*other, "other after its catch-up reload");
  l.reset();
  l = OpenLedger();
  ExpectCountsMatchEntries(*l, "reopened");

  // Expired tombstones leave the counts when they are dropped.
  clock_.Advance(61s);
  ASSERT_TRUE(l->CollectGarbage().ok());
  EXPECT_EQ(l->Counts().claims[static_cast<size_t>(ClaimState::kTombstone)], 0);
  ExpectCountsMatchEntries(*l, "tombstones expired");

  // With a classifier, prepared devices are counted by its class.
  l->SetDeviceClassifier([](const std::string& device) { return device.substr(0, 3); });
  int64_t gpus = l->Counts().prepared_devices.at("gpu");
  EXPECT_EQ(l->Counts().prepared_devices.size(), 1u);
  PrepareFully(*l, "e", {"gpu-5", "gpu-6"});
  EXPECT_EQ(l->Counts().prepared_devices.at("gpu"), gpus + 2);
  ASSERT_TRUE(l->BeginUnprepare("e").ok());
  EXPECT_EQ(l->Counts().prepared_devices.at("gpu"), gpus);
}

TEST_F(ClaimLedgerTest, SizeStaysProportionalToLiveClaims) {
  auto o = Options();
  o.compaction_min_bytes = 4096;
  auto l = std::move(ClaimLedger::Open(o)).value();
  uint64_t max_size = 0;
  for (int i = 0; i < 150; ++i) {
    std::string uid = "cycle-" + std::to_string(i);
    PrepareFully(*l, uid, {"gpu-0"});
    ASSERT_TRUE(l->BeginUnprepare(uid).ok());
    ASSERT_TRUE(l->FinishUnprepare(uid).ok());
    clock_.Advance(10s);  // a tombstone expires after 6 cycles
    uint64_t size = testing::FileSize(LogPath());
    max_size = std::max(max_size, size);
  }
  // At most ~7 live tombstones of < 400 bytes, times (1 + ratio), plus the
  // minimum and one more transition; 150 cycles wrote far more than that.
  EXPECT_LT(max_size, 3 * 7 * 400u + 4096 + 2000);
  EXPECT_GT(150u * 4 * 200, 10 * max_size);
}

TEST_F(ClaimLedgerTest, BytesPerTransitionDoNotDependOnClaimsHeld) {
  auto l = OpenLedger();
  auto growth = [&](const std::string& uid) {
    uint64_t before = testing::FileSize(LogPath());
    PrepareFully(*l, uid, {"dev-" + uid});
    return testing::FileSize(LogPath()) - before;
  };
  uint64_t alone = growth("first-1");
  for (int i = 0; i < 300; ++i) PrepareFully(*l, "bulk-" + std::to_string(1000 + i), {"b" + std::to_string(i)});
  uint64_t crowded = growth("later-1");
  EXPECT_EQ(alone, crowded);
}

TEST_F(ClaimLedgerTest, OnlyTheStartedRecordsWaitForTheirSync) {
  FaultInjectionEnv env;
  auto o = Options();
  o.env = &env;
  auto l = std::move(ClaimLedger::Open(o)).value();
  int before = env.syncs();
  PrepareFully(*l, "uid-a", {"gpu-0"});
  ASSERT_TRUE(l->BeginUnprepare("uid-a").ok());
  ASSERT_TRUE(l->FinishUnprepare("uid-a").ok());
  // PrepareStarted and UnprepareStarted; the UnprepareStarted sync also
  // covered PrepareCompleted, and the tombstone is still pending.
  EXPECT_EQ(env.syncs() - before, 2);
  ASSERT_TRUE(l->Flush().ok());
  EXPECT_EQ(env.syncs() - before, 3);
  ASSERT_TRUE(l->Flush().ok());  // nothing pending: no sync
  EXPECT_EQ(env.syncs() - before, 3);
  l.reset();
  EXPECT_EQ(env.syncs() - before, 3);
  env.DropUnsyncedData();
  auto reopened = std::move(ClaimLedger::Open(o)).value();
  EXPECT_EQ(MustGet(*reopened, "uid-a").state, ClaimState::kTombstone);
}

TEST_F(ClaimLedgerTest, AFinalRecordLostWithUnsyncedDataLeavesTheStepBeforeIt) {
  FaultInjectionEnv env;
  auto o = Options();
  o.env = &env;
  {
    auto l = std::move(ClaimLedger::Open(o)).value();
    PrepareFully(*l, "done", {"gpu-0"});
    ASSERT_TRUE(l->BeginPrepare(Request("pending", {"gpu-2"})).ok());
    PrepareFully(*l, "undone", {"gpu-1"});
    ASSERT_TRUE(l->BeginUnprepare("undone").ok());
    ASSERT_TRUE(l->FinishUnprepare("undone").ok());
    ASSERT_TRUE(l->CompletePrepare("pending", Prepared("pending", {"gpu-2"}), {{"done", true}}).ok());
    // A power loss now: neither the process nor its destructor syncs again.
    env.DropUnsyncedData();
    env.set_fail_syncs(true);
  }
  env.set_fail_syncs(false);
  env.DropUnsyncedData();
  auto l = std::move(ClaimLedger::Open(o)).value();
  EXPECT_TRUE(l->report().clean()) << l->report().Summary();
  // Covered by later syncs: as acknowledged.
  EXPECT_EQ(MustGet(*l, "done").state, ClaimState::kPrepareCompleted);
  // Not covered: the state before the final record, never an earlier one.
  // The tombstone's claim still holds its device, and its undo is redone by
  // the reconciler; the completed claim is redone by the next Prepare.
  EXPECT_EQ(MustGet(*l, "undone").state, ClaimState::kUnprepareStarted);
  EXPECT_EQ(MustGet(*l, "pending").state, ClaimState::kPrepareStarted);
  auto again = l->BeginPrepare(Request("pending", {"gpu-2"}));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->outcome, BeginOutcome::kRetry);
  auto taken = l->BeginPrepare(Request("other", {"gpu-1"}));
  ASSERT_FALSE(taken.ok());
  EXPECT_NE(taken.status().message().find("undone"), std::string::npos) << taken.status().message();
}

TEST_F(ClaimLedgerTest, AFreedDeviceIsDurablyFreeBeforeItsNextHolderIsDurable) {
  FaultInjectionEnv env;
  auto o = Options();
  o.env = &env;
  {
    auto l = std::move(ClaimLedger::Open(o)).value();
    PrepareFully(*l, "old", {"gpu-0"});
    ASSERT_TRUE(l->BeginUnprepare("old").ok());
    ASSERT_TRUE(l->FinishUnprepare("old").ok());  // acknowledged, not yet synced
    ASSERT_TRUE(l->BeginPrepare(Request("new", {"gpu-0"})).ok());
    env.DropUnsyncedData();
    env.set_fail_syncs(true);
  }
  env.set_fail_syncs(false);
  auto l = std::move(ClaimLedger::Open(o)).value();
  EXPECT_TRUE(l->report().clean()) << l->report().Summary();
  // The new holder's sync carried the tombstone before it.
  EXPECT_EQ(MustGet(*l, "old").state, ClaimState::kTombstone);
  EXPECT_EQ(MustGet(*l, "new").state, ClaimState::kPrepareStarted);
}

TEST_F(ClaimLedgerTest, ConcurrentTransitionsShareSyncsAndAreDurableWhenAcknowledged) {
  FaultInjectionEnv env;
  auto o = Options();
  o.env = &env;
  auto l = std::move(ClaimLedger::Open(o)).value();
  constexpr int kClaims = 8;
  int before = env.syncs();
  // The first transition's sync stays in flight until all eight records are
  // appended; the seven appended meanwhile then share the next sync.
  env.HoldSyncsUntilAppends(env.appends() + kClaims);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < kClaims; ++i) {
    threads.emplace_back([&, i] {
      std::string uid = "gc-" + std::to_string(i);
      if (l->BeginPrepare(Request(uid, {"gpu-" + std::to_string(i)})).ok()) ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), kClaims);
  int syncs = env.syncs() - before;
  EXPECT_LT(syncs, kClaims);
  EXPECT_GE(syncs, 1);
  // Every acknowledged transition survives losing what was never synced.
  l.reset();
  env.DropUnsyncedData();
  auto reopened = std::move(ClaimLedger::Open(o)).value();
  EXPECT_TRUE(reopened->report().clean()) << reopened->report().Summary();
  for (int i = 0; i < kClaims; ++i) {
    EXPECT_EQ(MustGet(*reopened, "gc-" + std::to_string(i)).state, ClaimState::kPrepareStarted) << i;
  }
}

TEST_F(ClaimLedgerTest, AFailedGroupSyncFailsEveryTransitionItCoveredAndRecordsNone) {
  FaultInjectionEnv env;
  auto o = Options();
  o.env = &env;
  auto l = std::move(ClaimLedger::Open(o)).value();
  PrepareFully(*l, "kept", {"gpu-9"});
  ASSERT_TRUE(l->Flush().ok());
  constexpr int kClaims = 4;
  env.set_fail_syncs(true);
  env.HoldSyncsUntilAppends(env.appends() + kClaims);
  std::vector<std::thread> threads;
  std::atomic<int> failed{0};
  for (int i = 0; i < kClaims; ++i) {
    threads.emplace_back([&, i] {
      auto b = l->BeginPrepare(Request("f-" + std::to_string(i), {"gpu-" + std::to_string(i)}));
      if (!b.ok()) {
        EXPECT_NE(b.status().message().find("f-" + std::to_string(i)), std::string::npos) << b.status().message();
        ++failed;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed.load(), kClaims);
  env.set_fail_syncs(false);
  for (int i = 0; i < kClaims; ++i) EXPECT_FALSE(l->Get("f-" + std::to_string(i))->has_value()) << i;
  EXPECT_EQ(MustGet(*l, "kept").state, ClaimState::kPrepareCompleted);
  EXPECT_TRUE(l->BeginPrepare(Request("f-0", {"gpu-0"})).ok());
  auto insp = InspectLedger(dir_.path());
  ASSERT_TRUE(insp.ok());
  EXPECT_FALSE(insp->damaged());
}

TEST_F(ClaimLedgerTest, RecordsCutAfterAFailedSyncAreNotKeptByAnotherProcessThatReadThem) {
  // Two ledgers on one directory, as two plugin processes: the writer's
  // syncs fail, the reader runs on the real file system.
  FaultInjectionEnv env;
  auto o = Options();
  o.env = &env;
  auto writer = std::move(ClaimLedger::Open(o)).value();
  auto reader = OpenLedger();
  PrepareFully(*writer, "kept", {"gpu-9"});
  ASSERT_TRUE(writer->Flush().ok());
  env.set_fail_syncs(true);
  const uint64_t appended = env.appends();
  // The writer's sync waits for a second append, which the test makes once
  // the reader has read the first record.
  env.HoldSyncsUntilAppends(appended + 2);
  std::thread t([&] { EXPECT_FALSE(writer->BeginPrepare(Request("cut-1", {"gpu-0"})).ok()); });
  env.WaitForAppends(appended + 1);
  EXPECT_EQ(MustGet(*reader, "cut-1").state, ClaimState::kPrepareStarted);
  const uint64_t size_with_cut = testing::FileSize(LogPath());
  {
    auto other = env.OpenAppend(JoinPath(dir_.path(), "unrelated"));
    ASSERT_TRUE(other.ok());
    ASSERT_TRUE((*other)->Append("x").ok());
  }
  t.join();
  env.set_fail_syncs(false);
  // The writer cut its record off; one of the same length takes its place,
  // so the file has the inode and the size the reader last saw.
  ASSERT_TRUE(writer->BeginPrepare(Request("cut-2", {"gpu-1"})).ok());
  ASSERT_EQ(testing::FileSize(LogPath()), size_with_cut);
  EXPECT_FALSE(reader->Get("cut-1")->has_value());
  EXPECT_EQ(MustGet(*reader, "cut-2").state, ClaimState::kPrepareStarted);
  auto taken = reader->BeginPrepare(Request("other", {"gpu-1"}));
  ASSERT_FALSE(taken.ok());
  EXPECT_NE(taken.status().message().find("cut-2"), std::string::npos) << taken.status().message();
}

TEST_F(ClaimLedgerTest, AcknowledgedTransitionsSurviveLossOfUnsyncedData) {
  FaultInjectionEnv env;
  auto o = Options();
  o.env = &env;
  {
    auto l = std::move(ClaimLedger::Open(o)).value();
    PrepareFully(*l, "uid-a", {"gpu-0"});
    ASSERT_TRUE(l->BeginPrepare(Request("uid-b", {"gpu-1"})).ok());
    ASSERT_TRUE(l->BeginUnprepare("uid-a").ok());
  }
  env.DropUnsyncedData();
  auto l = std::move(ClaimLedger::Open(o)).value();
  EXPECT_TRUE(l->report().clean()) << l->report().Summary();
  EXPECT_EQ(MustGet(*l, "uid-a").state, ClaimState::kUnprepareStarted);
  EXPECT_EQ(MustGet(*l, "uid-b").state, ClaimState::kPrepareStarted);
}

TEST_F(ClaimLedgerTest, FailedSyncIsNotAcknowledgedAndLeavesNoPartialRecord) {
  FaultInjectionEnv env;
  auto o = Options();
  o.env = &env;
  auto l = std::move(ClaimLedger::Open(o)).value();
  PrepareFully(*l, "uid-a", {"gpu-0"});
  env.set_fail_syncs(true);
  auto b = l->BeginPrepare(Request("uid-b", {"gpu-1"}));
  EXPECT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("uid-b"), std::string::npos);
  env.set_fail_syncs(false);
  EXPECT_FALSE(l->Get("uid-b")->has_value());
  EXPECT_TRUE(l->BeginPrepare(Request("uid-b", {"gpu-1"})).ok());
  auto insp = InspectLedger(dir_.path());
  ASSERT_TRUE(insp.ok());
  EXPECT_FALSE(insp->damaged());
}

TEST_F(ClaimLedgerTest, FailpointErrorsStopTheTransition) {
  auto l = OpenLedger();
  ASSERT_TRUE(FailPoints::Process().Load("ledger-before-started-write=error").ok());
  EXPECT_EQ(l->BeginPrepare(Request("uid-a", {"gpu-0"})).status().code(), StatusCode::kInternal);
  EXPECT_FALSE(l->Get("uid-a")->has_value());
  ASSERT_TRUE(FailPoints::Process().Load("ledger-before-started-write=off;ledger-mid-append=error").ok());
  EXPECT_FALSE(l->BeginPrepare(Request("uid-a", {"gpu-0"})).ok());
  FailPoints::Process().Clear();
  EXPECT_TRUE(l->BeginPrepare(Request("uid-a", {"gpu-0"})).ok());
  l.reset();
  auto l2 = OpenLedger();
  EXPECT_TRUE(l2->report().clean()) << l2->report().Summary();
  EXPECT_EQ(MustGet(*l2, "uid-a").state, ClaimState::kPrepareStarted);
}

TEST_F(ClaimLedgerTest, EveryLedgerFailpointIsReached) {
  auto o = Options();
  auto l = std::move(ClaimLedger::Open(o)).value();
  FailPoints::Process().Clear();
  PrepareFully(*l, "uid-a", {"gpu-0"});
  ASSERT_TRUE(l->BeginUnprepare("uid-a").ok());
  ASSERT_TRUE(l->FinishUnprepare("uid-a").ok());
  ASSERT_TRUE(l->CollectGarbage(true).ok());
  for (const char* fp :
       {"ledger-before-started-write", "ledger-after-started-write", "ledger-before-completed-write",
        "ledger-after-completed-write", "ledger-before-unprepare-write", "ledger-after-unprepare-write",
        "ledger-before-tombstone-write", "ledger-after-tombstone-write", "ledger-before-compaction-rename",
        "ledger-after-compaction-rename"}) {
    EXPECT_GE(FailPoints::Process().HitCount(fp), 1) << fp;
  }
  // The torn-write point is reached only while armed: unarmed, a record is
  // one write.
  EXPECT_EQ(FailPoints::Process().HitCount("ledger-mid-append"), 0);
  ASSERT_TRUE(FailPoints::Process().Load("ledger-mid-append=pass").ok());
  PrepareFully(*l, "uid-b", {"gpu-1"});
  EXPECT_EQ(FailPoints::Process().HitCount("ledger-mid-append"), 2);
  FailPoints::Process().Clear();
}

TEST_F(ClaimLedgerTest, RebootRedoesNodeWorkAndReturnsSameDevices) {
  {
    auto l = OpenLedger("boot-1");
    PrepareFully(*l, "uid-a", {"gpu-0"});
    ASSERT_TRUE(l->BeginPrepare(Request("uid-b", {"gpu-1"})).ok());
  }
  auto l = OpenLedger("boot-2");
  EXPECT_EQ(l->report().earlier_boot_claims, 2u);
  auto b = l->BeginPrepare(Request("uid-a", {"gpu-0"}));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->outcome, BeginOutcome::kRedoAfterReboot);
  EXPECT_TRUE(b->entry.from_earlier_boot);
  EXPECT_EQ(b->entry.prepared, Prepared("uid-a", {"gpu-0"}));
  // Other devices would be a different answer to the kubelet.
  EXPECT_EQ(l->CompletePrepare("uid-a", Prepared("uid-a", {"gpu-9"}), nullptr).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(l->CompletePrepare("uid-a", b->entry.prepared, nullptr).ok());
  auto again = l->BeginPrepare(Request("uid-a", {"gpu-0"}));
  EXPECT_EQ(again->outcome, BeginOutcome::kAlreadyPrepared);
  EXPECT_EQ(MustGet(*l, "uid-a").boot_id, "boot-2");
  // Unprepare of an earlier-boot claim still works from the ledger alone.
  auto u = l->BeginUnprepare("uid-b");
  ASSERT_TRUE(u.ok() && u->has_value());
  EXPECT_TRUE((*u)->from_earlier_boot);
  EXPECT_TRUE(l->FinishUnprepare("uid-b").ok());
}

TEST_F(ClaimLedgerTest, BootIdIsReadFromInjectedPath) {
  std::string path = JoinPath(dir_.path(), "boot_id");
  ASSERT_TRUE(WriteFileAtomically(path, "abc-123\n").ok());
  auto o = Options("");
  o.boot_id_path = path;
  auto l = std::move(ClaimLedger::Open(o)).value();
  EXPECT_EQ(l->boot_id(), "abc-123");
}

// Consumable shares: several claims hold one device, each with a share.
constexpr int64_t kGi = int64_t{1} << 30;

BeginPrepareRequest ShareRequest(const std::string& uid, const std::string& device, int64_t memory,
                                 const std::string& sharing = R"({"kind":"GpuConfig"})") {
  BeginPrepareRequest r = Request(uid, {device});
  r.allocation[0].share_id = "share-" + uid;
  r.allocation[0].consumed_capacity = {{"memory", std::to_string(memory)}};
  r.shares = {{device, "share-" + uid, {{"memory", memory}}, {{"memory", 80 * kGi}}, sharing}};
  return r;
}

TEST_F(ClaimLedgerTest, SharesOfOneDeviceWithEqualConfigAreHeldTogether) {
  auto l = OpenLedger();
  ASSERT_TRUE(l->BeginPrepare(ShareRequest("uid-a", "gpu-0", 40 * kGi)).ok());
  ASSERT_TRUE(l->CompletePrepare("uid-a", Prepared("uid-a", {"gpu-0"}), {}).ok());
  auto b = l->BeginPrepare(ShareRequest("uid-b", "gpu-0", 40 * kGi));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->entry.shares.size(), 1u);
  auto holders = l->HoldersOf("gpu-0");
  ASSERT_TRUE(holders.ok());
  ASSERT_EQ(holders->size(), 2u);
  EXPECT_EQ((*holders)[0].uid, "uid-a");
  EXPECT_EQ((*holders)[1].uid, "uid-b");
  EXPECT_TRUE(l->report().double_holds.empty());
  // Full: one byte more is refused, naming device, capacity, use and holders.
  auto c = l->BeginPrepare(ShareRequest("uid-c", "gpu-0", 1));
  ASSERT_EQ(c.status().code(), StatusCode::kConflict);
  EXPECT_EQ(c.status().message(),
            "requested device gpu-0 has no room for claim uid-c: it publishes memory 85899345920, claims uid-a, "
            "uid-b already consume 85899345920 (according to checkpoint) and this claim consumes 1");
  EXPECT_FALSE(l->Get("uid-c")->has_value()) << "a refused share records nothing";
  // The accounting is in the entries: a reopened ledger, and another
  // process's, refuse alike; and the shares read back as written.
  l.reset();
  auto again = OpenLedger();
  auto other = OpenLedger();
  EXPECT_TRUE(again->report().double_holds.empty()) << again->report().double_holds[0];
  EXPECT_EQ(MustGet(*again, "uid-a").shares, ShareRequest("uid-a", "gpu-0", 40 * kGi).shares);
  EXPECT_EQ(MustGet(*again, "uid-a").allocation[0].consumed_capacity.at("memory"), std::to_string(40 * kGi));
  EXPECT_EQ(other->BeginPrepare(ShareRequest("uid-c", "gpu-0", 1)).status().code(), StatusCode::kConflict);
  // Released shares free their capacity.
  ASSERT_TRUE(other->BeginUnprepare("uid-a").ok());
  ASSERT_TRUE(other->FinishUnprepare("uid-a").ok());
  EXPECT_TRUE(again->BeginPrepare(ShareRequest("uid-c", "gpu-0", 40 * kGi)).ok());
}

TEST_F(ClaimLedgerTest, ASharedDeviceRefusesOtherConfigsAndExclusiveClaims) {
  auto l = OpenLedger();
  ASSERT_TRUE(l->BeginPrepare(ShareRequest("uid-a", "gpu-0", kGi)).ok());
  auto other_config = l->BeginPrepare(ShareRequest("uid-b", "gpu-0", kGi, R"({"kind":"GpuConfig","x":1})"));
  ASSERT_EQ(other_config.status().code(), StatusCode::kConflict);
  EXPECT_EQ(other_config.status().message(),
            "requested device gpu-0 has conflicting configuration with already prepared claim uid-a");
  // A claim without a share of the device holds it alone: refused while
  // shares are held, and it refuses shares while it holds it.
  auto exclusive = l->BeginPrepare(Request("uid-c", {"gpu-0"}));
  EXPECT_EQ(exclusive.status().message(), "gpu-0 already allocated by claim uid-a (according to checkpoint)");
  ASSERT_TRUE(l->BeginPrepare(Request("uid-d", {"gpu-1"})).ok());
  auto onto_exclusive = l->BeginPrepare(ShareRequest("uid-e", "gpu-1", kGi));
  EXPECT_EQ(onto_exclusive.status().message(), "gpu-1 already allocated by claim uid-d (according to checkpoint)");
  // A capacity the device does not publish cannot be counted.
  BeginPrepareRequest unknown = ShareRequest("uid-f", "gpu-0", kGi);
  unknown.shares[0].consumed["shares"] = 1;
  EXPECT_EQ(l->BeginPrepare(unknown).status().message(),
            "requested device gpu-0 does not publish the capacity \"shares\" claim uid-f consumes");
}

TEST_F(ClaimLedgerTest, EntriesWithoutSharesReadAsExclusiveAndNewShareFieldsSurvive) {
  auto l = OpenLedger();
  PrepareFully(*l, "uid-a", {"gpu-0"});
  EXPECT_TRUE(MustGet(*l, "uid-a").shares.empty());
  EXPECT_FALSE(EntryToJson(MustGet(*l, "uid-a")).contains("shares")) << "an exclusive entry is written as before";
  // A share written by a newer version with a field this one does not know.
  nlohmann::json j = EntryToJson(MustGet(*l, "uid-a"));
  j["shares"] = nlohmann::json::parse(
      R"([{"resource":"gpu-0","shareID":"s","consumed":{"memory":5},"sharing":"{}","future":[1]}, {"consumed":{}}])");
  auto e = EntryFromJson(j);
  ASSERT_TRUE(e.ok());
  ASSERT_EQ(e->shares.size(), 1u) << "a share naming no device is dropped";
  EXPECT_EQ(e->shares[0].consumed.at("memory"), 5);
  EXPECT_EQ(EntryToJson(*e)["shares"][0]["future"], nlohmann::json::parse("[1]"));
}

TEST_F(ClaimLedgerTest, TwoInstancesSeeEachOthersWrites) {
  auto a = OpenLedger();
  auto b = OpenLedger();
  PrepareFully(*a, "uid-a", {"gpu-0"});
  EXPECT_EQ(MustGet(*b, "uid-a").state, ClaimState::kPrepareCompleted);
  auto c = b->BeginPrepare(Request("uid-b", {"gpu-0"}));
  EXPECT_EQ(c.status().code(), StatusCode::kConflict);
  // Compaction by one instance (a new file) is noticed by the other.
  ASSERT_TRUE(a->CollectGarbage(true).ok());
  ASSERT_TRUE(b->BeginUnprepare("uid-a").ok());
  ASSERT_TRUE(b->FinishUnprepare("uid-a").ok());
  EXPECT_EQ(MustGet(*a, "uid-a").state, ClaimState::kTombstone);
  EXPECT_TRUE(a->BeginPrepare(Request("uid-b", {"gpu-0"})).ok());
  EXPECT_EQ(MustGet(*b, "uid-b").state, ClaimState::kPrepareStarted);
}

TEST_F(ClaimLedgerTest, LockWaitEndsAtTheDeadline) {
  auto o = Options();
  o.lock_timeout = 100ms;
  auto l = std::move(ClaimLedger::Open(o)).value();
  int fd = ::open(JoinPath(dir_.path(), kLockFileName).c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  auto start = std::chrono::steady_clock::now();
  auto b = l->BeginPrepare(Request("uid-a", {"gpu-0"}));
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(b.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(b.status().message().find("ledger.lock"), std::string::npos);
  EXPECT_GE(took, 100ms);
  EXPECT_LT(took, 3s);
  ::close(fd);
  // The abandoned waiter must not keep the lock.
  EXPECT_TRUE(l->BeginPrepare(Request("uid-a", {"gpu-0"})).ok());
}

TEST_F(ClaimLedgerTest, LockWaiterProceedsWhenHolderReleases) {
  auto l = OpenLedger();
  int fd = ::open(JoinPath(dir_.path(), kLockFileName).c_str(), O_RDWR);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  std::atomic<bool> done{false};
  std::thread t([&] {
    auto b = l->BeginPrepare(Request("uid-a", {"gpu-0"}));
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    done = true;
  });
  EXPECT_FALSE(done.load());  // cannot pass while the lock is held
  ::close(fd);
  t.join();
  EXPECT_TRUE(done.load());
}

TEST_F(ClaimLedgerTest, ParallelThreadsNeverDoubleHold) {
  auto l = OpenLedger();
  std::atomic<int> started{0}, conflicts{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        std::string uid = "t" + std::to_string(t) + "-" + std::to_string(i);
        auto b = l->BeginPrepare(Request(uid, {"gpu-" + std::to_string(i % 4)}));
        if (!b.ok()) {
          EXPECT_EQ(b.status().code(), StatusCode::kConflict);
          ++conflicts;
          continue;
        }
        ++started;
        EXPECT_TRUE(l->CompletePrepare(uid, Prepared(uid, {"x"}), nullptr).ok());
        EXPECT_TRUE(l->BeginUnprepare(uid).ok());
        EXPECT_TRUE(l->FinishUnprepare(uid).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(started + conflicts, 200);
  EXPECT_GT(started.load(), 0);
  auto insp = InspectLedger(dir_.path());
  EXPECT_EQ(insp->double_held, 0u);
}

TEST_F(ClaimLedgerTest, UnknownFieldsAndRecordTypesSurviveRewrite) {
  {
    auto l = OpenLedger();
    PrepareFully(*l, "uid-a", {"gpu-0"});
  }
  // A newer version appended an entry with a field we do not know, and a record type we do not know.
  ClaimEntry e;
  {
    auto l = OpenLedger();
    e = MustGet(*l, "uid-a");
  }
  nlohmann::json j = EntryToJson(e);
  j["futureField"] = {{"kept", true}};
  std::string add = EncodeRecord(static_cast<uint8_t>(RecordType::kEntry), j.dump()) +
                    EncodeRecord(42, "opaque-future-record");
  auto existing = ReadFileToString(LogPath());
  ASSERT_TRUE(WriteFileAtomically(LogPath(), *existing + add).ok());
  auto l = OpenLedger();
  EXPECT_FALSE(l->report().warnings.empty());
  EXPECT_EQ(MustGet(*l, "uid-a").extra["futureField"]["kept"], true);
  ASSERT_TRUE(l->BeginUnprepare("uid-a").ok());
  ASSERT_TRUE(l->CollectGarbage(true).ok());
  auto bytes = ReadFileToString(LogPath());
  EXPECT_NE(bytes->find("futureField"), std::string::npos);
  EXPECT_NE(bytes->find("opaque-future-record"), std::string::npos);
  l.reset();
  auto l2 = OpenLedger();
  EXPECT_EQ(MustGet(*l2, "uid-a").state, ClaimState::kUnprepareStarted);
  EXPECT_EQ(MustGet(*l2, "uid-a").extra["futureField"]["kept"], true);
}

TEST_F(ClaimLedgerTest, FutureVersionIsSetAsideAndLedgerStartsFresh) {
  std::string future = EncodeFileHeader(7) + EncodeRecord(2, "{}");
  ASSERT_TRUE(WriteFileAtomically(LogPath(), future).ok());
  auto l = OpenLedger();
  OpenReport r = l->report();
  ASSERT_FALSE(r.clean());
  EXPECT_NE(r.errors[0].find("unsupported format version 7"), std::string::npos);
  ASSERT_FALSE(r.set_aside_file.empty());
  EXPECT_EQ(*ReadFileToString(r.set_aside_file), future);
  EXPECT_TRUE(l->BeginPrepare(Request("uid-a", {"gpu-0"})).ok());
}

TEST_F(ClaimLedgerTest, ForeignFileIsSetAside) {
  ASSERT_TRUE(WriteFileAtomically(LogPath(), "{\"checksum\": 1, \"v2\": {}}").ok());
  auto l = OpenLedger();
  EXPECT_FALSE(l->report().clean());
  EXPECT_NE(l->report().Summary().find("bad magic"), std::string::npos);
  EXPECT_TRUE(l->BeginPrepare(Request("uid-a", {"gpu-0"})).ok());
}

TEST_F(ClaimLedgerTest, TornTailIsQuarantinedAndTruncated) {
  {
    auto l = OpenLedger();
    PrepareFully(*l, "uid-a", {"gpu-0"});
  }
  auto bytes = *ReadFileToString(LogPath());
  std::string torn = bytes + EncodeRecord(2, "{\"uid\":\"uid-b\",\"state\":\"PrepareStarted\"}").substr(0, 20);
  ASSERT_TRUE(WriteFileAtomically(LogPath(), torn).ok());
  auto l = OpenLedger();
  OpenReport r = l->report();
  EXPECT_FALSE(r.clean());
  EXPECT_EQ(r.damaged_bytes, 20u);
  ASSERT_FALSE(r.quarantine_file.empty());
  EXPECT_TRUE(PathExists(r.quarantine_file));
  EXPECT_EQ(MustGet(*l, "uid-a").state, ClaimState::kPrepareCompleted);
  EXPECT_FALSE(InspectLedger(dir_.path())->damaged());
}

TEST_F(ClaimLedgerTest, DamageInTheMiddleKeepsLaterRecords) {
  {
    auto l = OpenLedger();
    ASSERT_TRUE(l->BeginPrepare(Request("uid-a", {"gpu-0"})).ok());
    ASSERT_TRUE(l->BeginPrepare(Request("uid-b", {"gpu-1"})).ok());
    ASSERT_TRUE(l->BeginPrepare(Request("uid-c", {"gpu-2"})).ok());
  }
  auto bytes = *ReadFileToString(LogPath());
  size_t pos = bytes.find("uid-b");
  bytes[pos + 2] ^= 0x55;
  ASSERT_TRUE(WriteFileAtomically(LogPath(), bytes).ok());
  auto l = OpenLedger();
  EXPECT_FALSE(l->report().clean());
  EXPECT_TRUE(l->Get("uid-a")->has_value());
  EXPECT_FALSE(l->Get("uid-b")->has_value());
  EXPECT_TRUE(l->Get("uid-c")->has_value());
}

}  // namespace
}  // namespace nvdra::ledger

namespace nvdra::ledger {
namespace {

TEST_F(ClaimLedgerTest, RepeatedDamageNeverOverwritesAnEarlierQuarantineFile) {
  { auto l = OpenLedger(); }
  std::vector<std::string> quarantined;
  for (int round = 0; round < 2; ++round) {
    auto bytes = *ReadFileToString(LogPath());
    ASSERT_TRUE(WriteFileAtomically(LogPath(), bytes + "torn-" + std::to_string(round)).ok());
    auto l = OpenLedger();  // same fake time both rounds
    quarantined.push_back(l->report().quarantine_file);
  }
  ASSERT_NE(quarantined[0], quarantined[1]);
  EXPECT_NE(ReadFileToString(quarantined[0])->find("torn-0"), std::string::npos);
  EXPECT_NE(ReadFileToString(quarantined[1])->find("torn-1"), std::string::npos);
}

// Notes which step of the timed request (util/request_steps.h) runs when
// the ledger appends a record and when it syncs.
class StepProbeEnv final : public ForwardingLedgerEnv {
 public:
  std::vector<RequestStep> appends, syncs;

  Result<std::unique_ptr<AppendFile>> OpenAppend(const std::string& path) override {
    auto f = base().OpenAppend(path);
    if (!f.ok()) return f.status();
    return std::unique_ptr<AppendFile>(new File(this, std::move(f).value()));
  }

 private:
  static RequestStep Running() {
    RequestSteps* steps = CurrentRequestSteps();
    if (steps == nullptr) return RequestStep::kRpcOther;
    RequestStep running = steps->Switch(RequestStep::kLogging);
    steps->Switch(running);
    return running;
  }
  class File final : public ForwardingAppendFile {
   public:
    File(StepProbeEnv* env, std::unique_ptr<AppendFile> f) : ForwardingAppendFile(std::move(f)), env_(env) {}
    Status Append(std::string_view data) override {
      env_->appends.push_back(Running());
      return base().Append(data);
    }
    Status Sync() override {
      env_->syncs.push_back(Running());
      return base().Sync();
    }

   private:
    StepProbeEnv* env_;
  };
};

TEST_F(ClaimLedgerTest, TimedRequestChargesEachAppendAndItsSyncToTheirOwnSteps) {
  StepProbeEnv env;
  LedgerOptions o = Options();
  o.env = &env;
  auto opened = ClaimLedger::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  auto& l = **opened;
  RequestSteps steps(RequestStep::kEngineOther);
  ScopedSteps scope(&steps);
  env.appends.clear();
  env.syncs.clear();
  PrepareFully(l, "uid-a", {"gpu-0"});
  ASSERT_TRUE(l.Get("uid-a").ok());
  ASSERT_TRUE(l.BeginUnprepare("uid-a").ok());
  ASSERT_TRUE(l.FinishUnprepare("uid-a").ok());
  // Each record is one write.
  using S = RequestStep;
  EXPECT_EQ(env.appends, (std::vector<S>{S::kAppendStarted, S::kAppendFinal, S::kAppendStarted, S::kAppendFinal}));
  // The final records wait for no sync (docs/ledger-format.md).
  EXPECT_EQ(env.syncs, (std::vector<S>{S::kSyncStarted, S::kSyncStarted}));
  // The Get appended nothing: its time went to ledger_read, and the request
  // is back in its own step.
  EXPECT_EQ(steps.Switch(S::kEngineOther), S::kEngineOther);
}

}  // namespace
}  // namespace nvdra::ledger
