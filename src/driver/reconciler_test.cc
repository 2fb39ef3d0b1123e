// The reconciler's decisions carried out through the real engine, ledger
// and CDI writer on a temporary directory, with the API server played by a
// FakeClaimSource and time by a FakeClock: which entries a pass asks the API
// server about, when a grace period starts, runs and starts over, and what
// a pass releases.
#include "driver/reconciler.h"

#include <gtest/gtest.h>

#include "driver/engine_test_util.h"
#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::driver {
namespace {

using testing::FakeClaimSource;
using testing::FakeKind;
using testing::kDriver;
using testing::kFar;
using testing::Ref;

constexpr auto kGrace = std::chrono::minutes(10);

class ReconcilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path();
    cdi_ = std::make_unique<cdi::CdiSpecWriter>(dir_ + "/cdi", "k8s.gpu.nvidia.com", "claim");
    ASSERT_TRUE(cdi_->EnsureRoot().ok());
    Start("boot-1");
  }
  void TearDown() override { Stop(); }
  void Stop() {
    reconciler_.reset();
    engine_.reset();
    ledger_.reset();
  }
  // The plugin (re)starts in boot `boot`.
  void Start(const std::string& boot) {
    Stop();
    ASSERT_TRUE(MakeDirectories(dir_ + "/plugin").ok());
    ASSERT_TRUE(WriteFileAtomically(dir_ + "/boot_id", boot + "\n").ok());
    ledger::LedgerOptions o;
    o.dir = dir_ + "/plugin";
    o.boot_id_path = dir_ + "/boot_id";
    o.clock = &clock_;
    auto l = ledger::ClaimLedger::Open(o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    ledger_ = std::move(l).value();
    EngineOptions eo;
    eo.node_name = "node-1";
    eo.clock = &clock_;
    engine_ = std::make_unique<Engine>(eo, *ledger_, kind_, claims_, *cdi_, nullptr);
    ReconcilerOptions ro;
    ro.clock = &clock_;
    ro.completed_grace = kGrace;
    ro.node_name = "node-1";
    reconciler_ = std::make_unique<Reconciler>(*engine_, claims_, nullptr, ro);
  }
  model::ClaimRef Prepared(const std::string& uid, const std::string& device) {
    model::ClaimRef ref = testing::PutReservedClaim(claims_, uid, kDriver, device);
    auto out = engine_->PrepareClaim(ref, kFar);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    return ref;
  }
  std::optional<ledger::ClaimState> State(const std::string& uid) {
    auto e = ledger_->Get(uid);
    EXPECT_TRUE(e.ok());
    if (!e.ok() || !*e) return std::nullopt;
    return (*e)->state;
  }
  bool SpecExists(const std::string& uid) { return PathExists(*cdi_->ClaimSpecPath(uid)); }

  ::nvdra::testing::TempDir tmp_{"nvdra-reconciler"};
  std::string dir_;
  FakeClock clock_;
  FakeClaimSource claims_;
  FakeKind kind_;
  std::unique_ptr<cdi::CdiSpecWriter> cdi_;
  std::unique_ptr<ledger::ClaimLedger> ledger_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Reconciler> reconciler_;
};

// A prepared claim that is gone, comes back, and goes again: its grace
// period starts over from the second time it was seen gone.
TEST_F(ReconcilerTest, AGracePeriodStartsOverWhenTheClaimCameBackMeanwhile) {
  model::ClaimRef a = Prepared("uid-a", "gpu-0");
  auto snapshot = claims_.Get(a.ns, a.name);
  ASSERT_TRUE(snapshot.ok());
  claims_.Remove(a.ns, a.name);
  EXPECT_EQ(reconciler_->RunOnce().stale_completed, 1);
  clock_.Advance(std::chrono::minutes(6));
  claims_.Put(*snapshot);
  ReconcileReport back = reconciler_->RunOnce();
  EXPECT_EQ(back.stale_completed, 0);
  EXPECT_EQ(back.checked, 1);
  claims_.Remove(a.ns, a.name);
  clock_.Advance(std::chrono::minutes(6));  // 12 minutes after it first went: the first clock would be over
  ReconcileReport again = reconciler_->RunOnce();
  EXPECT_EQ(again.stale_completed, 1);
  EXPECT_EQ(again.unprepared_completed, 0);
  EXPECT_EQ(State("uid-a"), ledger::ClaimState::kPrepareCompleted);
  clock_.Advance(kGrace);
  ReconcileReport released = reconciler_->RunOnce();
  EXPECT_EQ(released.unprepared_completed, 1);
  EXPECT_EQ(State("uid-a"), ledger::ClaimState::kTombstone);
  EXPECT_FALSE(SpecExists("uid-a"));
  EXPECT_EQ(kind_.unprepared, std::vector<std::string>{"uid-a"});
}

// An entry without a claim name (rebuilt from a CDI spec that names none)
// cannot be looked up: the API server is not asked, and the entry is
// released once the grace period is over, shallow passes included.
TEST_F(ReconcilerTest, AnEntryWithoutANameIsReleasedAfterTheGracePeriodWithoutAskingTheApiServer) {
  ledger::RebuiltClaim c;
  c.uid = "uid-nameless";
  c.devices = {"gpu-3"};
  ASSERT_TRUE(ledger_->RebuildEntry(c).ok());
  const int gets = claims_.gets();
  ReconcileReport first = reconciler_->RunOnce();
  EXPECT_EQ(first.checked, 1);
  EXPECT_EQ(first.unprepared_completed, 0);
  EXPECT_EQ(State("uid-nameless"), ledger::ClaimState::kPrepareCompleted);
  clock_.Advance(kGrace / 2);
  EXPECT_EQ(reconciler_->RunOnce(/*deep=*/false).unprepared_completed, 0);
  clock_.Advance(kGrace);
  ReconcileReport released = reconciler_->RunOnce();
  EXPECT_EQ(released.unprepared_completed, 1);
  EXPECT_EQ(State("uid-nameless"), ledger::ClaimState::kTombstone);
  EXPECT_EQ(claims_.gets(), gets) << "a claim without a name cannot be asked for";
}

// Prepared claims of this boot are the kubelet's to release: a shallow pass
// skips them. One prepared before the node rebooted gets no Unprepare from
// the kubelet, so every pass checks it, and one whose claim is gone goes
// at once.
TEST_F(ReconcilerTest, ShallowPassesStillCheckClaimsPreparedBeforeTheReboot) {
  model::ClaimRef before = Prepared("uid-before", "gpu-0");
  Start("boot-2");
  model::ClaimRef now = Prepared("uid-now", "gpu-1");
  const int gets = claims_.gets();
  ReconcileReport shallow = reconciler_->RunOnce(/*deep=*/false);
  EXPECT_EQ(shallow.checked, 1);
  EXPECT_EQ(claims_.gets(), gets + 1) << "only the claim of the earlier boot is asked for";
  EXPECT_EQ(shallow.unprepared_completed, 0);
  // Gone: the earlier boot's claim is released at once (what it set up
  // went with the boot, no grace), this boot's is not even asked about.
  claims_.Remove(before.ns, before.name);
  claims_.Remove(now.ns, now.name);
  ReconcileReport released = reconciler_->RunOnce(/*deep=*/false);
  EXPECT_EQ(released.unprepared_completed, 1);
  EXPECT_EQ(released.stale_completed, 0);
  EXPECT_EQ(State("uid-before"), ledger::ClaimState::kTombstone);
  EXPECT_EQ(State("uid-now"), ledger::ClaimState::kPrepareCompleted);
}

// A half-prepared claim is kept while its claim is allocated as recorded,
// rolled back at once when the scheduler gave it to another node (no grace:
// no kubelet call can complete it now), and an API error keeps it.
TEST_F(ReconcilerTest, AHalfPreparedClaimAllocatedToAnotherNodeIsRolledBackAtOnce) {
  model::ClaimRef a = testing::PutReservedClaim(claims_, "uid-half", kDriver, "gpu-2");
  ledger::BeginPrepareRequest req;
  req.uid = a.uid;
  req.ns = a.ns;
  req.name = a.name;
  req.allocation = {{"r", kDriver, "node-1", "gpu-2", false, ""}};
  req.undo = {{"devices", {"gpu-2"}}};
  ASSERT_TRUE(ledger_->BeginPrepare(req).ok());
  ReconcileReport kept = reconciler_->RunOnce();
  EXPECT_EQ(kept.unprepared_started, 0);
  EXPECT_EQ(State("uid-half"), ledger::ClaimState::kPrepareStarted);
  claims_.FailWith(Unavailable("the API server is restarting"));
  ReconcileReport unreachable = reconciler_->RunOnce();
  EXPECT_EQ(unreachable.api_errors, 1);
  EXPECT_EQ(State("uid-half"), ledger::ClaimState::kPrepareStarted);
  claims_.FailWith(Status::Ok());
  ClaimSnapshot moved = *claims_.Get(a.ns, a.name);
  moved.results[0].pool = "node-2";
  claims_.Put(moved);
  ReconcileReport rolled_back = reconciler_->RunOnce();
  EXPECT_EQ(rolled_back.unprepared_started, 1);
  EXPECT_EQ(State("uid-half"), ledger::ClaimState::kTombstone);
  EXPECT_EQ(kind_.unprepared, std::vector<std::string>{"uid-half"});
}

}  // namespace
}  // namespace nvdra::driver
