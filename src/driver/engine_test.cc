#include "driver/engine.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <sstream>

#include "driver/engine_test_util.h"
#include "driver/reconciler.h"
#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::driver {
namespace {

using testing::FakeClaimSource;
using testing::FakeKind;

using testing::kDriver;
using testing::kFar;
using testing::Ref;

ClaimSnapshot Claim(const std::string& uid, const std::string& name, std::vector<std::string> devices,
                    std::vector<config::ClaimConfig> configs = {}) {
  ClaimSnapshot c;
  c.uid = uid;
  c.ns = "default";
  c.name = name;
  c.allocated = true;
  int i = 0;
  for (const auto& d : devices) {
    c.results.push_back({"req" + std::to_string(i++), kDriver, "node-1", d, false, ""});
  }
  c.configs = std::move(configs);
  return c;
}

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path();
    ASSERT_TRUE(MakeDirectories(dir_ + "/plugin").ok());
    ASSERT_TRUE(WriteFileAtomically(dir_ + "/boot_id", "boot-1\n").ok());
    cdi_ = std::make_unique<cdi::CdiSpecWriter>(dir_ + "/cdi", "k8s.gpu.nvidia.com", "claim");
    ASSERT_TRUE(cdi_->EnsureRoot().ok());
    kind_ = std::make_unique<FakeKind>();
    Reopen();
  }
  void TearDown() override {
    reconciler_.reset();
    engine_.reset();
    ledger_.reset();
  }
  void Reopen() {
    reconciler_.reset();
    engine_.reset();
    ledger_.reset();
    ledger::LedgerOptions o;
    o.dir = dir_ + "/plugin";
    o.boot_id_path = dir_ + "/boot_id";
    o.clock = &clock_;
    o.tombstone_ttl = std::chrono::minutes(5);
    auto l = ledger::ClaimLedger::Open(o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    ledger_ = std::move(l).value();
    engine_ = std::make_unique<Engine>(EngineOptions{}, *ledger_, *kind_, claims_, *cdi_, metrics_.get());
    ReconcilerOptions ro;
    ro.clock = &clock_;
    ro.completed_grace = std::chrono::minutes(10);
    reconciler_ = std::make_unique<Reconciler>(*engine_, claims_, nullptr, ro);
  }
  // The ledger is lost (0 bytes) while the plugin is down, then it starts
  // again: claims may be missing until the recovery rebuilds them.
  void LoseLedgerAndRestart() {
    const std::string log = ledger_->log_path();
    reconciler_.reset();
    engine_.reset();
    ledger_.reset();
    ASSERT_TRUE(WriteFileAtomically(log, "").ok());
    Reopen();
  }
  std::string SpecPath(const std::string& uid) { return *cdi_->ClaimSpecPath(uid); }
  std::optional<ledger::ClaimEntry> Entry(const std::string& uid) {
    auto e = ledger_->Get(uid);
    EXPECT_TRUE(e.ok());
    return e.ok() ? *e : std::nullopt;
  }
  off_t LedgerSize() {
    struct stat st;
    if (stat(ledger_->log_path().c_str(), &st) != 0) return -1;
    return st.st_size;
  }

  ::nvdra::testing::TempDir tmp_{"nvdra-engine"};
  std::string dir_;
  FakeClock clock_;
  FakeClaimSource claims_;
  std::unique_ptr<cdi::CdiSpecWriter> cdi_;
  std::unique_ptr<FakeKind> kind_;
  std::unique_ptr<metrics::DraMetrics> metrics_;  // null unless a test sets it before Reopen
  std::unique_ptr<ledger::ClaimLedger> ledger_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Reconciler> reconciler_;
};

TEST_F(EngineTest, PreparesWritesCdiSpecAndCompletes) {
  auto c = Claim("uid-a", "a", {"gpu-0", "gpu-1"});
  claims_.Put(c);
  auto r = engine_->PrepareClaim(Ref(c), kFar);
  ASSERT_EQ(r.status().message(), "");
  ASSERT_EQ(r.value().size(), 2u);
  EXPECT_EQ(r.value()[0].device, "gpu-0");
  EXPECT_EQ(r.value()[0].pool, "node-1");
  EXPECT_EQ(r.value()[0].requests, std::vector<std::string>{"req0"});
  EXPECT_EQ(r.value()[0].cdi_device_ids, std::vector<std::string>{"k8s.gpu.nvidia.com/claim=uid-a-gpu-0"});
  EXPECT_TRUE(PathExists(SpecPath("uid-a")));
  auto e = Entry("uid-a");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->state, ledger::ClaimState::kPrepareCompleted);
  EXPECT_EQ(e->name, "a");
  EXPECT_EQ(e->ns, "default");
}

// After a driver reload: the specs of completed claims get the kind's edits
// now, with the same CDI ids; claims no longer prepared get none back.
TEST_F(EngineTest, RewriteClaimSpecsRebuildsCompletedClaimsSpecsOnly) {
  auto a = Claim("uid-a", "a", {"gpu-0"});
  auto b = Claim("uid-b", "b", {"gpu-1"});
  claims_.Put(a);
  claims_.Put(b);
  auto prepared = engine_->PrepareClaim(Ref(a), kFar);
  ASSERT_EQ(prepared.status().message(), "");
  ASSERT_EQ(engine_->PrepareClaim(Ref(b), kFar).status().message(), "");
  ASSERT_TRUE(engine_->UnprepareClaim(Ref(b), kFar).ok());
  auto before = ReadFileToString(SpecPath("uid-a"));
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->find("-new-driver"), std::string::npos);

  kind_->env_suffix = "-new-driver";
  int errors = 0;
  EXPECT_EQ(engine_->RewriteClaimSpecs(&errors), 1);
  EXPECT_EQ(errors, 0);
  auto after = ReadFileToString(SpecPath("uid-a"));
  ASSERT_TRUE(after.ok());
  EXPECT_NE(after->find("FAKE_DEVICE=gpu-0-new-driver"), std::string::npos) << *after;
  EXPECT_NE(after->find("\"name\": \"uid-a-gpu-0\""), std::string::npos) << *after;
  EXPECT_FALSE(PathExists(SpecPath("uid-b")));
  // The recorded devices (and their CDI ids) are what a repeated Prepare returns.
  auto again = engine_->PrepareClaim(Ref(a), kFar);
  ASSERT_EQ(again.status().message(), "");
  EXPECT_EQ(again.value(), prepared.value());
}

TEST_F(EngineTest, RepeatedPrepareIsIdempotentAndRestoresTheCdiSpec) {
  auto c = Claim("uid-a", "a", {"gpu-0"});
  claims_.Put(c);
  auto first = engine_->PrepareClaim(Ref(c), kFar);
  ASSERT_EQ(first.status().message(), "");
  auto spec = ReadFileToString(SpecPath("uid-a"));
  ASSERT_TRUE(spec.ok());
  off_t size = LedgerSize();
  ASSERT_TRUE(RemoveFileIfExists(SpecPath("uid-a")).ok());  // tmpfs lost after a reboot

  auto second = engine_->PrepareClaim(Ref(c), kFar);
  ASSERT_EQ(second.status().message(), "");
  EXPECT_EQ(second.value(), first.value());
  EXPECT_EQ(LedgerSize(), size) << "an idempotent prepare must not write to the ledger";
  EXPECT_EQ(kind_->prepares.load(), 1);
  auto again = ReadFileToString(SpecPath("uid-a"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *spec);
  EXPECT_EQ(Entry("uid-a")->state, ledger::ClaimState::kPrepareCompleted);
}

TEST_F(EngineTest, RepeatedPrepareReturnsTheRecordedDevicesWhenTheReadinessGateNoLongerHolds) {
  auto c = Claim("uid-a", "a", {"gpu-0"});
  claims_.Put(c);
  auto first = engine_->PrepareClaim(Ref(c), kFar);
  ASSERT_EQ(first.status().message(), "");
  ASSERT_TRUE(RemoveFileIfExists(SpecPath("uid-a")).ok());
  // E.g. the ComputeDomain's daemon restarts while the kubelet repeats the call.
  kind_->not_ready = Unavailable("current node not ready");
  auto second = engine_->PrepareClaim(Ref(c), kFar);
  ASSERT_EQ(second.status().message(), "");
  EXPECT_EQ(second.value(), first.value());
  EXPECT_TRUE(PathExists(SpecPath("uid-a")));
  EXPECT_EQ(kind_->prepares.load(), 1);
  // A claim that is not prepared yet still waits for the gate.
  auto d = Claim("uid-b", "b", {"gpu-1"});
  claims_.Put(d);
  auto other = engine_->PrepareClaim(Ref(d), kFar);
  EXPECT_NE(other.status().message().find("not ready"), std::string::npos) << other.status().message();
  EXPECT_FALSE(Entry("uid-b"));
}

TEST_F(EngineTest, ClaimLookupErrorsArePerClaimAndLeaveNoEntry) {
  auto missing = engine_->PrepareClaim({"default", "uid-x", "x"}, kFar);
  EXPECT_NE(missing.status().message().find("retrieve claim default/x"), std::string::npos)
      << missing.status().message();

  auto c = Claim("uid-new", "b", {"gpu-0"});
  claims_.Put(c);
  auto replaced = engine_->PrepareClaim({"default", "uid-old", "b"}, kFar);
  EXPECT_NE(replaced.status().message().find("claim default/b got replaced"), std::string::npos)
      << replaced.status().message();

  auto na = Claim("uid-na", "na", {"gpu-0"});
  na.allocated = false;
  claims_.Put(na);
  auto not_alloc = engine_->PrepareClaim(Ref(na), kFar);
  EXPECT_NE(not_alloc.status().message().find("claim default/na not allocated"), std::string::npos)
      << not_alloc.status().message();

  EXPECT_FALSE(Entry("uid-x"));
  EXPECT_FALSE(Entry("uid-old"));
  EXPECT_FALSE(Entry("uid-na"));
}

TEST_F(EngineTest, OtherDriversResultsAreIgnored) {
  auto c = Claim("uid-a", "a", {"gpu-0"});
  c.results.push_back({"net", "net.example.com", "node-1", "nic-0", false, ""});
  claims_.Put(c);
  auto r = engine_->PrepareClaim(Ref(c), kFar);
  ASSERT_EQ(r.status().message(), "");
  ASSERT_EQ(r.value().size(), 1u);
  EXPECT_EQ(r.value()[0].device, "gpu-0");

  auto only_other = Claim("uid-b", "b", {});
  only_other.results.push_back({"net", "net.example.com", "node-1", "nic-0", false, ""});
  claims_.Put(only_other);
  auto none = engine_->PrepareClaim(Ref(only_other), kFar);
  EXPECT_EQ(none.status().message(), "");
  EXPECT_TRUE(none.value().empty());
  EXPECT_FALSE(Entry("uid-b"));
}

TEST_F(EngineTest, UnknownConfigFieldIsAPermanentErrorBeforeAnyDurableWrite) {
  config::ClaimConfig bad;
  bad.source = config::ConfigSource::kFromClaim;
  bad.driver = kDriver;
  bad.parameters_json = R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":"FakeConfig","unexpectedField":"foo"})";
  auto c = Claim("uid-a", "a", {"gpu-0"}, {bad});
  claims_.Put(c);
  auto r = engine_->PrepareClaim(Ref(c), kFar);
  EXPECT_NE(r.status().message().find("strict decoding error: unknown field \"unexpectedField\""), std::string::npos)
      << r.status().message();
  EXPECT_FALSE(Entry("uid-a"));
  EXPECT_EQ(kind_->prepares.load(), 0);
  EXPECT_FALSE(PathExists(SpecPath("uid-a")));
}

TEST_F(EngineTest, DeviceNotPublishedHereIsRefused) {
  auto c = Claim("uid-a", "a", {"gpu-99"});
  claims_.Put(c);
  auto r = engine_->PrepareClaim(Ref(c), kFar);
  EXPECT_NE(r.status().message().find("gpu-99"), std::string::npos) << r.status().message();
  EXPECT_FALSE(Entry("uid-a"));
}

// Device names repeat on every node, so the pool decides: a claim the
// scheduler allocated to another node's gpu-0 must not get this node's gpu-0.
TEST_F(EngineTest, AClaimAllocatedToAnotherNodeIsRefusedPermanently) {
  std::vector<std::string> reported;
  EngineOptions o;
  o.node_name = "node-1";
  o.on_permanent_failure = [&](const model::ClaimRef& c, const std::string&) { reported.push_back(c.uid); };
  reconciler_.reset();
  engine_ = std::make_unique<Engine>(o, *ledger_, *kind_, claims_, *cdi_, nullptr);
  auto c = Claim("uid-a", "a", {"gpu-0"});
  c.results[0].pool = "node-2";
  c.consumers = {"pod-1"};
  claims_.Put(c);
  auto r = engine_->PrepareClaim(Ref(c), kFar);
  EXPECT_NE(
      r.status().message().find("is allocated to node node-2 (device gpu-0, request req0), not to this node node-1"),
      std::string::npos)
      << r.status().message();
  EXPECT_EQ(reported, std::vector<std::string>{"uid-a"}) << "a permanent error";
  EXPECT_FALSE(Entry("uid-a"));
  EXPECT_EQ(kind_->prepares.load(), 0);
  EXPECT_FALSE(PathExists(SpecPath("uid-a")));
  // The same claim allocated here is prepared.
  c.results[0].pool = "node-1";
  claims_.Put(c);
  EXPECT_EQ(engine_->PrepareClaim(Ref(c), kFar).status().message(), "");
}

// A claim whose readiness gate may wait (a ComputeDomain channel claim) is
// refused at once when the ledger says another claim holds its device: the
// wait, up to the claim's deadline, would end in a misleading "not ready".
TEST_F(EngineTest, HeldDeviceIsRefusedBeforeTheReadinessWait) {
  auto a = Claim("uid-a", "a", {"gpu-0"});
  auto b = Claim("uid-b", "b", {"gpu-0"});
  claims_.Put(a);
  claims_.Put(b);
  ASSERT_EQ(engine_->PrepareClaim(Ref(a), kFar).status().message(), "");
  kind_->may_wait = true;
  kind_->not_ready = Unavailable("the domain is not ready on this node");
  const int checks = kind_->ready_checks.load();
  auto r = engine_->PrepareClaim(Ref(b), kFar);
  EXPECT_NE(r.status().message().find("gpu-0 already allocated by claim uid-a (according to checkpoint)"),
            std::string::npos)
      << r.status().message();
  EXPECT_EQ(kind_->ready_checks.load(), checks) << "refused before the readiness gate";
  EXPECT_FALSE(Entry("uid-b"));
  // Once A is unprepared, B goes on to its readiness gate.
  EXPECT_EQ(engine_->UnprepareClaim(Ref(a), kFar).message(), "");
  r = engine_->PrepareClaim(Ref(b), kFar);
  EXPECT_NE(r.status().message().find("the domain is not ready on this node"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(kind_->ready_checks.load(), checks + 1);
  kind_->not_ready = Status::Ok();
  EXPECT_EQ(engine_->PrepareClaim(Ref(b), kFar).status().message(), "");
}

TEST_F(EngineTest, AWaitAfterPrepareHoldsNoLockAndCompletesTheClaimOnceReady) {
  auto a = Claim("uid-a", "a", {"gpu-0"});
  claims_.Put(a);
  kind_->await_ready = true;
  std::optional<ledger::ClaimState> during;
  bool spec_during = true;
  kind_->on_await = [&] {
    // The entry is recorded, the spec not yet written; a Prepare of another
    // claim is not held up meanwhile.
    during = Entry("uid-a")->state;
    spec_during = PathExists(SpecPath("uid-a"));
    auto b = Claim("uid-b", "b", {"gpu-1"});
    claims_.Put(b);
    kind_->await_ready = false;
    EXPECT_EQ(
        engine_->PrepareClaim(Ref(b), std::chrono::steady_clock::now() + std::chrono::seconds(5)).status().message(),
        "");
    return Status::Ok();
  };
  auto r = engine_->PrepareClaim(Ref(a), kFar);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(during, ledger::ClaimState::kPrepareStarted);
  EXPECT_FALSE(spec_during);
  EXPECT_EQ(Entry("uid-a")->state, ledger::ClaimState::kPrepareCompleted);
  EXPECT_TRUE(PathExists(SpecPath("uid-a")));
  EXPECT_EQ(Entry("uid-b")->state, ledger::ClaimState::kPrepareCompleted);
}

TEST_F(EngineTest, AnUnprepareDuringTheWaitAfterPrepareRunsAtOnceAndThePrepareGivesUp) {
  auto a = Claim("uid-a", "a", {"gpu-0"});
  a.consumers = {"pod-1"};
  claims_.Put(a);
  kind_->await_ready = true;
  Status unprepared = Internal("not called");
  kind_->on_await = [&] {
    // The kubelet gave up on the pod and unprepares: the claim's locks are
    // free, so this neither waits nor deadlocks.
    unprepared = engine_->UnprepareClaim(Ref(a), std::chrono::steady_clock::now() + std::chrono::seconds(2));
    return Status::Ok();
  };
  auto r = engine_->PrepareClaim(Ref(a), kFar);
  EXPECT_EQ(unprepared.message(), "");
  EXPECT_EQ(kind_->unprepared, std::vector<std::string>{"uid-a"});
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("was unprepared or prepared again while it waited to become ready"),
            std::string::npos)
      << r.status().message();
  EXPECT_FALSE(PathExists(SpecPath("uid-a"))) << "no spec for a claim that was unprepared";
  EXPECT_NE(Entry("uid-a")->state, ledger::ClaimState::kPrepareCompleted);
}

TEST_F(EngineTest, AFailedWaitKeepsTheClaimStartedAndTheRetryRedoesPrepareAndTheWait) {
  auto a = Claim("uid-a", "a", {"gpu-0"});
  claims_.Put(a);
  kind_->await_ready = true;
  kind_->on_await = [] { return Unavailable("daemon not ready"); };
  auto r = engine_->PrepareClaim(Ref(a), kFar);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().message();
  EXPECT_FALSE(r.status().permanent());
  EXPECT_EQ(Entry("uid-a")->state, ledger::ClaimState::kPrepareStarted);
  EXPECT_FALSE(PathExists(SpecPath("uid-a")));
  kind_->on_await = nullptr;
  ASSERT_TRUE(engine_->PrepareClaim(Ref(a), kFar).ok());
  EXPECT_EQ(kind_->prepares.load(), 2);
  EXPECT_EQ(kind_->awaits.load(), 2);
  EXPECT_EQ(Entry("uid-a")->state, ledger::ClaimState::kPrepareCompleted);
}

TEST_F(EngineTest, DeviceHeldByAnotherClaimIsRefusedNamingTheHolder) {
  auto a = Claim("uid-a", "a", {"gpu-0"});
  auto b = Claim("uid-b", "b", {"gpu-0"});
  claims_.Put(a);
  claims_.Put(b);
  ASSERT_EQ(engine_->PrepareClaim(Ref(a), kFar).status().message(), "");
  auto r = engine_->PrepareClaim(Ref(b), kFar);
  EXPECT_NE(r.status().message().find("gpu-0 already allocated by claim uid-a (according to checkpoint)"),
            std::string::npos)
      << r.status().message();
  EXPECT_FALSE(Entry("uid-b"));
  // Once A is unprepared, B gets the device.
  EXPECT_EQ(engine_->UnprepareClaim(Ref(a), kFar).message(), "");
  EXPECT_EQ(engine_->PrepareClaim(Ref(b), kFar).status().message(), "");
}

// Upstream's phrase leads ("requested device is not allocatable: <name>"),
// our detail follows; the refusal is permanent and records nothing.
TEST_F(EngineTest, UnpublishedDeviceIsRefusedWithUpstreamsPhrase) {
  auto c = Claim("uid-a", "a", {"gpu-99"});
  claims_.Put(c);
  auto r = engine_->PrepareClaim(Ref(c), kFar);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("requested device is not allocatable: gpu-99"), std::string::npos)
      << r.status().message();
  EXPECT_FALSE(r.status().retryable());
  EXPECT_FALSE(Entry("uid-a"));
}

TEST_F(EngineTest, StaleHalfPreparedHolderIsCheckedRightAway) {
  auto a = Claim("uid-a", "a", {"gpu-0"});
  claims_.Put(a);
  kind_->fail_prepare = Internal("device busy");
  auto failed = engine_->PrepareClaim(Ref(a), kFar);
  ASSERT_NE(failed.status().message(), "");
  ASSERT_EQ(Entry("uid-a")->state, ledger::ClaimState::kPrepareStarted);
  kind_->fail_prepare = Status::Ok();
  claims_.Remove("default", "a");  // force-deleted pod and claim

  auto b = Claim("uid-b", "b", {"gpu-0"});
  claims_.Put(b);
  auto r = engine_->PrepareClaim(Ref(b), kFar);
  EXPECT_EQ(r.status().message(), "");
  EXPECT_EQ(kind_->unprepared, std::vector<std::string>{"uid-a"});
}

TEST_F(EngineTest, LiveHalfPreparedHolderStillBlocks) {
  auto a = Claim("uid-a", "a", {"gpu-0"});
  claims_.Put(a);
  kind_->fail_prepare = Internal("device busy");
  ASSERT_NE(engine_->PrepareClaim(Ref(a), kFar).status().message(), "");
  kind_->fail_prepare = Status::Ok();
  auto b = Claim("uid-b", "b", {"gpu-0"});
  claims_.Put(b);
  auto r = engine_->PrepareClaim(Ref(b), kFar);
  EXPECT_NE(r.status().message().find("already allocated by claim uid-a"), std::string::npos) << r.status().message();
  EXPECT_TRUE(kind_->unprepared.empty());
}

TEST_F(EngineTest, UnprepareRemovesSpecAndRefusesALatePrepare) {
  auto a = Claim("uid-a", "a", {"gpu-0"});
  claims_.Put(a);
  ASSERT_EQ(engine_->PrepareClaim(Ref(a), kFar).status().message(), "");
  EXPECT_EQ(engine_->UnprepareClaim(Ref(a), kFar).message(), "");
  EXPECT_FALSE(PathExists(SpecPath("uid-a")));
  EXPECT_EQ(kind_->unprepared, std::vector<std::string>{"uid-a"});
  auto late = engine_->PrepareClaim(Ref(a), kFar);
  EXPECT_NE(late.status().message(), "") << "a late Prepare retry must not resurrect an unprepared claim";
  EXPECT_EQ(engine_->UnprepareClaim(Ref(a), kFar).message(), "");
}

TEST_F(EngineTest, AClaimStillReservedForAPodIsPreparedAgainAfterAnUnprepare) {
  auto a = Claim("uid-a", "a", {"gpu-0"});
  a.consumers = {"pod-1", "pod-2"};
  claims_.Put(a);
  auto first = engine_->PrepareClaim(Ref(a), kFar);
  ASSERT_EQ(first.status().message(), "");
  ASSERT_EQ(engine_->UnprepareClaim(Ref(a), kFar).message(), "");  // pod 1 ended
  a.consumers = {"pod-2"};                                         // pod 2 starts
  claims_.Put(a);
  auto second = engine_->PrepareClaim(Ref(a), kFar);
  EXPECT_EQ(second.status().message(), "");
  EXPECT_EQ(second.value(), first.value());
  ASSERT_EQ(engine_->UnprepareClaim(Ref(a), kFar).message(), "");  // pod 2 ended
  a.consumers = {};
  claims_.Put(a);
  EXPECT_NE(engine_->PrepareClaim(Ref(a), kFar).status().message(), "") << "reserved for nobody: a late retry";
}

TEST_F(EngineTest, UnprepareOfUnknownClaimSucceedsWithoutTheApiServer) {
  claims_.FailWith(Unavailable("connection refused"));
  EXPECT_EQ(engine_->UnprepareClaim({"default", "uid-nobody", "n"}, kFar).message(), "");
}

TEST_F(EngineTest, UnprepareWorksWhenTheApiServerIsDown) {
  auto a = Claim("uid-a", "a", {"gpu-0"});
  claims_.Put(a);
  ASSERT_EQ(engine_->PrepareClaim(Ref(a), kFar).status().message(), "");
  claims_.FailWith(Unavailable("connection refused"));
  EXPECT_EQ(engine_->UnprepareClaim(Ref(a), kFar).message(), "");
  auto e = Entry("uid-a");
  EXPECT_TRUE(!e || e->state == ledger::ClaimState::kTombstone);
}

TEST_F(EngineTest, FailedDeviceUndoKeepsTheEntryForARetry) {
  auto a = Claim("uid-a", "a", {"gpu-0"});
  claims_.Put(a);
  ASSERT_EQ(engine_->PrepareClaim(Ref(a), kFar).status().message(), "");
  kind_->fail_unprepare = Internal("GPU in use");
  EXPECT_NE(engine_->UnprepareClaim(Ref(a), kFar).message().find("GPU in use"), std::string::npos);
  auto e = Entry("uid-a");
  ASSERT_TRUE(e);
  EXPECT_TRUE(ledger::HoldsResources(e->state));
  kind_->fail_unprepare = Status::Ok();
  EXPECT_EQ(engine_->UnprepareClaim(Ref(a), kFar).message(), "");
}

// The rendered value of one exact sample line ("name{labels}"), or "" if absent.
std::string Sample(const std::string& page, const std::string& series) {
  std::istringstream in(page);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with(series + " ")) return line.substr(series.size() + 1);
  }
  return "";
}

TEST_F(EngineTest, GaugesFollowEveryTransitionIncludingAnotherProcesssAndTombstoneExpiry) {
  metrics::MetricRegistry registry;
  auto m = metrics::DraMetrics::Create(registry, {.driver = kDriver,
                                                  .node = "node-1",
                                                  .device_types = kind_->MetricDeviceTypes(),
                                                  .ledger_states = {"PrepareStarted", "PrepareCompleted",
                                                                    "UnprepareStarted", "Tombstone"}});
  ASSERT_TRUE(m.ok());
  metrics_ = std::move(m).value();
  Reopen();
  auto gpus = [&] {
    return Sample(registry.Render(),
                  "nvidia_dra_prepared_devices{node=\"node-1\",driver=\"gpu.nvidia.com\",device_type=\"gpu\"}");
  };
  auto claims = [&](const std::string& state) {
    return Sample(registry.Render(), "nvdra_ledger_claims{driver=\"gpu.nvidia.com\",state=\"" + state + "\"}");
  };
  auto a = Claim("uid-a", "a", {"gpu-0"});
  auto b = Claim("uid-b", "b", {"gpu-1", "gpu-2"});
  claims_.Put(a);
  claims_.Put(b);
  ASSERT_EQ(engine_->PrepareClaim(Ref(a), kFar).status().message(), "");
  ASSERT_EQ(engine_->PrepareClaim(Ref(b), kFar).status().message(), "");
  EXPECT_EQ(gpus(), "3");
  EXPECT_EQ(claims("PrepareCompleted"), "2");
  EXPECT_EQ(claims("Tombstone"), "0");
  EXPECT_EQ(Sample(registry.Render(), "nvdra_ledger_bytes{driver=\"gpu.nvidia.com\"}"), std::to_string(LedgerSize()));

  ASSERT_EQ(engine_->UnprepareClaim(Ref(a), kFar).message(), "");
  EXPECT_EQ(gpus(), "2");
  EXPECT_EQ(claims("PrepareCompleted"), "1");
  EXPECT_EQ(claims("Tombstone"), "1");

  // Another process (its own ledger handle on the same directory) prepares a
  // claim and half-prepares another: the next request here counts them.
  ledger::LedgerOptions o;
  o.dir = dir_ + "/plugin";
  o.boot_id_path = dir_ + "/boot_id";
  o.clock = &clock_;
  auto other = ledger::ClaimLedger::Open(o);
  ASSERT_TRUE(other.ok());
  ledger::BeginPrepareRequest c{.uid = "uid-c",
                                .ns = "default",
                                .name = "c",
                                .allocation = {{"req0", kDriver, "node-1", "gpu-3", false, ""}}};
  auto begun = (*other)->BeginPrepare(c);
  ASSERT_TRUE(begun.ok());
  ledger::PreparedDevice dev;
  dev.device = "gpu-3";
  ASSERT_TRUE((*other)->CompletePrepare("uid-c", {dev}, nullptr, begun->entry.attempt).ok());
  ledger::BeginPrepareRequest d{.uid = "uid-d",
                                .ns = "default",
                                .name = "d",
                                .allocation = {{"req0", kDriver, "node-1", "gpu-4", false, ""}}};
  ASSERT_TRUE((*other)->BeginPrepare(d).ok());
  EXPECT_EQ(gpus(), "2");  // not read yet
  ASSERT_EQ(engine_->UnprepareClaim({"default", "uid-gone", "gone"}, kFar).message(), "");
  EXPECT_EQ(gpus(), "3");
  EXPECT_EQ(claims("PrepareCompleted"), "2");
  EXPECT_EQ(claims("PrepareStarted"), "1");

  // The tombstone of a expires; the next transition drops it.
  clock_.Advance(std::chrono::minutes(6));
  ASSERT_EQ(engine_->UnprepareClaim(Ref(b), kFar).message(), "");
  EXPECT_EQ(gpus(), "1");
  EXPECT_EQ(claims("PrepareCompleted"), "1");
  EXPECT_EQ(claims("Tombstone"), "1");  // b's; a's expired
}

TEST_F(EngineTest, PrepareAfterRebootRedoesNodeWorkAndReturnsSameDevices) {
  auto a = Claim("uid-a", "a", {"gpu-0"});
  claims_.Put(a);
  auto first = engine_->PrepareClaim(Ref(a), kFar);
  ASSERT_EQ(first.status().message(), "");
  ASSERT_TRUE(RemoveFileIfExists(SpecPath("uid-a")).ok());
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/boot_id", "boot-2\n").ok());
  Reopen();
  auto second = engine_->PrepareClaim(Ref(a), kFar);
  ASSERT_EQ(second.status().message(), "");
  EXPECT_EQ(second.value(), first.value());
  EXPECT_EQ(kind_->prepares.load(), 2);
  EXPECT_TRUE(PathExists(SpecPath("uid-a")));
}

TEST_F(EngineTest, AfterARebootADeviceOfAGoneClaimGoesToItsNewClaimAtOnce) {
  auto a = Claim("uid-a", "a", {"gpu-0"});
  claims_.Put(a);
  ASSERT_EQ(engine_->PrepareClaim(Ref(a), kFar).status().message(), "");
  // The node reboots; meanwhile A's pod and claim are deleted and gpu-0 is
  // allocated to B.
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/boot_id", "boot-2\n").ok());
  Reopen();
  claims_.Remove("default", "a");
  auto b = Claim("uid-b", "b", {"gpu-0"});
  claims_.Put(b);
  auto r = engine_->PrepareClaim(Ref(b), kFar);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(kind_->unprepared, std::vector<std::string>{"uid-a"});
  EXPECT_EQ(Entry("uid-b")->state, ledger::ClaimState::kPrepareCompleted);
}

TEST_F(EngineTest, AShallowPassAfterARebootReleasesAGoneClaimPreparedBeforeIt) {
  auto a = Claim("uid-a", "a", {"gpu-0"});
  claims_.Put(a);
  ASSERT_EQ(engine_->PrepareClaim(Ref(a), kFar).status().message(), "");
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/boot_id", "boot-2\n").ok());
  Reopen();
  claims_.Remove("default", "a");
  auto rep = reconciler_->RunOnce(/*deep=*/false);
  EXPECT_EQ(rep.unprepared_completed, 1);
  EXPECT_FALSE(Entry("uid-a").has_value() && ledger::HoldsResources(Entry("uid-a")->state));
}

TEST_F(EngineTest, ReconcilerRollsBackHalfPreparedClaimsWhoseClaimIsGone) {
  auto a = Claim("uid-a", "a", {"gpu-0"});
  auto b = Claim("uid-b", "b", {"gpu-1"});
  claims_.Put(a);
  claims_.Put(b);
  kind_->fail_prepare = Internal("boom");
  ASSERT_NE(engine_->PrepareClaim(Ref(a), kFar).status().message(), "");
  ASSERT_NE(engine_->PrepareClaim(Ref(b), kFar).status().message(), "");
  kind_->fail_prepare = Status::Ok();
  claims_.Remove("default", "a");
  auto b2 = b;
  b2.uid = "uid-b2";  // re-created under the same name
  claims_.Put(b2);

  auto rep = reconciler_->RunOnce();
  EXPECT_EQ(rep.unprepared_started, 2);
  auto ea = Entry("uid-a");
  EXPECT_TRUE(!ea || !ledger::HoldsResources(ea->state));
  auto eb = Entry("uid-b");
  EXPECT_TRUE(!eb || !ledger::HoldsResources(eb->state));
}

TEST_F(EngineTest, ReconcilerKeepsEntriesWhenTheApiServerErrs) {
  auto a = Claim("uid-a", "a", {"gpu-0"});
  claims_.Put(a);
  kind_->fail_prepare = Internal("boom");
  ASSERT_NE(engine_->PrepareClaim(Ref(a), kFar).status().message(), "");
  claims_.FailWith(Unavailable("503"));
  auto rep = reconciler_->RunOnce();
  EXPECT_EQ(rep.api_errors, 1);
  EXPECT_EQ(rep.unprepared_started, 0);
  EXPECT_EQ(Entry("uid-a")->state, ledger::ClaimState::kPrepareStarted);
}

TEST_F(EngineTest, ReconcilerUnpreparesGonePreparedClaimsOnlyAfterTheGracePeriod) {
  auto a = Claim("uid-a", "a", {"gpu-0"});
  claims_.Put(a);
  ASSERT_EQ(engine_->PrepareClaim(Ref(a), kFar).status().message(), "");
  claims_.Remove("default", "a");
  auto rep = reconciler_->RunOnce();
  EXPECT_EQ(rep.stale_completed, 1);
  EXPECT_EQ(rep.unprepared_completed, 0);
  EXPECT_EQ(Entry("uid-a")->state, ledger::ClaimState::kPrepareCompleted);
  clock_.Advance(std::chrono::minutes(11));
  rep = reconciler_->RunOnce();
  EXPECT_EQ(rep.unprepared_completed, 1);
  EXPECT_FALSE(PathExists(SpecPath("uid-a")));
}

TEST_F(EngineTest, ShallowPassesLeavePreparedClaimsToTheKubelet) {
  auto a = Claim("uid-a", "a", {"gpu-0"});
  claims_.Put(a);
  ASSERT_EQ(engine_->PrepareClaim(Ref(a), kFar).status().message(), "");
  int gets = claims_.gets();
  auto rep = reconciler_->RunOnce(/*deep=*/false);
  EXPECT_EQ(claims_.gets(), gets) << "a shallow pass must not ask the API server about prepared claims";
  EXPECT_EQ(rep.stale_completed, 0);
  claims_.Remove("default", "a");
  rep = reconciler_->RunOnce(/*deep=*/true);
  EXPECT_EQ(rep.stale_completed, 1);
  clock_.Advance(std::chrono::minutes(11));
  reconciler_->RunOnce(/*deep=*/false);  // the grace clock keeps running between deep passes
  rep = reconciler_->RunOnce(/*deep=*/true);
  EXPECT_EQ(rep.unprepared_completed, 1);
}

TEST_F(EngineTest, ReconcilerReleasesClaimsThatExistButAreNoLongerAllocatedAsRecorded) {
  auto a = Claim("uid-a", "a", {"gpu-0"});
  auto b = Claim("uid-b", "b", {"gpu-1"});
  auto c = Claim("uid-c", "c", {"gpu-2"});
  claims_.Put(a);
  claims_.Put(b);
  claims_.Put(c);
  ASSERT_EQ(engine_->PrepareClaim(Ref(a), kFar).status().message(), "");
  kind_->fail_prepare = Internal("boom");
  ASSERT_NE(engine_->PrepareClaim(Ref(b), kFar).status().message(), "");
  kind_->fail_prepare = Status::Ok();
  ASSERT_EQ(engine_->PrepareClaim(Ref(c), kFar).status().message(), "");
  auto rep = reconciler_->RunOnce();
  EXPECT_EQ(rep.unprepared_started + rep.unprepared_completed + rep.stale_completed, 0) << "all current";

  a.allocated = false;  // deallocated, same UID
  a.results.clear();
  claims_.Put(a);
  b.results[0].device = "gpu-5";  // allocated again under the same UID, another device
  claims_.Put(b);
  c.results[0].pool = "node-2";  // allocated to another node
  claims_.Put(c);
  ReconcilerOptions ro;
  ro.clock = &clock_;
  ro.completed_grace = std::chrono::minutes(10);
  ro.node_name = "node-1";
  reconciler_ = std::make_unique<Reconciler>(*engine_, claims_, nullptr, ro);
  rep = reconciler_->RunOnce();
  EXPECT_EQ(rep.unprepared_started, 1) << "the half-prepared one goes at once";
  EXPECT_EQ(rep.stale_completed, 2) << "prepared ones wait for the grace period";
  auto eb = Entry("uid-b");
  EXPECT_TRUE(!eb || !ledger::HoldsResources(eb->state));
  clock_.Advance(std::chrono::minutes(11));
  rep = reconciler_->RunOnce();
  EXPECT_EQ(rep.unprepared_completed, 2);
  EXPECT_FALSE(PathExists(SpecPath("uid-a")));
  EXPECT_FALSE(PathExists(SpecPath("uid-c")));
  EXPECT_EQ(kind_->unprepared.size(), 3u);
}

TEST_F(EngineTest, PermanentErrorsReachTheCallbackOnlyForPermanentFailures) {
  std::vector<std::string> reported;
  EngineOptions o;
  o.on_permanent_failure = [&](const model::ClaimRef& c, const std::string&) { reported.push_back(c.uid); };
  reconciler_.reset();
  engine_ = std::make_unique<Engine>(o, *ledger_, *kind_, claims_, *cdi_, nullptr);
  auto missing = Claim("uid-x", "x", {"gpu-99"});  // not on this node: permanent
  claims_.Put(missing);
  EXPECT_NE(engine_->PrepareClaim(Ref(missing), kFar).status().message(), "");
  auto busy = Claim("uid-y", "y", {"gpu-0"});  // a device failure: the kubelet retries
  claims_.Put(busy);
  kind_->fail_prepare = Internal("device busy");
  EXPECT_NE(engine_->PrepareClaim(Ref(busy), kFar).status().message(), "");
  EXPECT_EQ(reported, std::vector<std::string>{"uid-x"});
}

TEST_F(EngineTest, ReconcilerRemovesOrphanCdiSpecsOnly) {
  auto a = Claim("uid-a", "a", {"gpu-0"});
  claims_.Put(a);
  ASSERT_EQ(engine_->PrepareClaim(Ref(a), kFar).status().message(), "");
  cdi::Spec orphan = cdi_->BuildClaimSpec("uid-orphan", {{"gpu-3", {}}});
  orphan.devices[0].edits.env = {"X=1"};
  ASSERT_TRUE(cdi_->WriteClaimSpec("uid-orphan", orphan).ok());
  auto rep = reconciler_->RunOnce();
  EXPECT_EQ(rep.orphan_specs_removed, 1);
  EXPECT_FALSE(PathExists(SpecPath("uid-orphan")));
  EXPECT_TRUE(PathExists(SpecPath("uid-a")));
}

TEST_F(EngineTest, ReconcilerSweepsTempFilesOfCrashedWritesButNotOfKnownClaims) {
  auto a = Claim("uid-a", "a", {"gpu-0"});
  claims_.Put(a);
  ASSERT_EQ(engine_->PrepareClaim(Ref(a), kFar).status().message(), "");
  const std::string crashed = dir_ + "/cdi/.k8s.gpu.nvidia.com-claim_uid-gone.json.tmp-1";
  const std::string in_flight = dir_ + "/cdi/.k8s.gpu.nvidia.com-claim_uid-a.json.tmp-2";
  ASSERT_TRUE(WriteFileAtomically(crashed, "{").ok());
  ASSERT_TRUE(WriteFileAtomically(in_flight, "{").ok());
  reconciler_->RunOnce();
  EXPECT_FALSE(PathExists(crashed));
  EXPECT_TRUE(PathExists(in_flight));
  EXPECT_TRUE(PathExists(SpecPath("uid-a")));
}

// An empty ledger is never "no claims": the specs of the claims it held stay,
// their entries are rebuilt (holding their devices), and only then does the
// ledger become the truth again and orphan specs are swept.
TEST_F(EngineTest, ALostLedgerIsRebuiltFromTheCdiSpecsBeforeAnySpecIsSwept) {
  auto a = Claim("uid-a", "a", {"gpu-0"});
  auto b = Claim("uid-b", "b", {"gpu-1"});
  claims_.Put(a);
  claims_.Put(b);
  ASSERT_EQ(engine_->PrepareClaim(Ref(a), kFar).status().message(), "");
  ASSERT_EQ(engine_->PrepareClaim(Ref(b), kFar).status().message(), "");
  LoseLedgerAndRestart();
  ASSERT_TRUE(*ledger_->ClaimsMayBeMissing());
  // A spec nobody can read does not keep the recovery open forever.
  ASSERT_TRUE(WriteFileAtomically(SpecPath("uid-garbage"), "{ not json").ok());

  auto rep = reconciler_->RunOnce();
  EXPECT_EQ(rep.errors, 0);
  // Rebuilt, the recovery ends in this pass, and its sweep removes only the
  // spec that held nothing.
  EXPECT_EQ(rep.orphan_specs_removed, 1);
  EXPECT_FALSE(PathExists(SpecPath("uid-garbage")));
  EXPECT_TRUE(PathExists(SpecPath("uid-a")));
  EXPECT_TRUE(PathExists(SpecPath("uid-b")));
  EXPECT_FALSE(*ledger_->ClaimsMayBeMissing());
  auto ea = Entry("uid-a");
  ASSERT_TRUE(ea.has_value());
  EXPECT_EQ(ea->state, ledger::ClaimState::kPrepareCompleted);

  // The rebuilt entry holds its device against a new claim ...
  auto c = Claim("uid-c", "c", {"gpu-0"});
  claims_.Put(c);
  auto refused = engine_->PrepareClaim(Ref(c), kFar);
  EXPECT_NE(refused.status().message().find("uid-a"), std::string::npos) << refused.status().message();
  // ... and the claim's own Prepare answers with its device and names the entry.
  auto again = engine_->PrepareClaim(Ref(a), kFar);
  ASSERT_EQ(again.status().message(), "");
  ASSERT_EQ(again.value().size(), 1u);
  EXPECT_EQ(again.value()[0].device, "gpu-0");
  EXPECT_EQ(Entry("uid-a")->name, "a");

  // The recovery is over: orphan specs go again.
  cdi::Spec orphan = cdi_->BuildClaimSpec("uid-orphan", {{"gpu-3", {}}});
  orphan.devices[0].edits.env = {"X=1"};
  ASSERT_TRUE(cdi_->WriteClaimSpec("uid-orphan", orphan).ok());
  rep = reconciler_->RunOnce();
  EXPECT_EQ(rep.orphan_specs_removed, 1);
  EXPECT_TRUE(PathExists(SpecPath("uid-b")));
}

// A directory, a FIFO or a /dev/zero link planted at spec names holds no
// claim: the recovery reads none of them (nor hangs on the FIFO) and ends.
TEST_F(EngineTest, ADirectoryOrAFifoAtASpecNameDoesNotKeepTheRecoveryFromFinishing) {
  LoseLedgerAndRestart();
  ASSERT_TRUE(*ledger_->ClaimsMayBeMissing());
  ASSERT_EQ(::mkdir(SpecPath("uid-dir").c_str(), 0755), 0);
  ASSERT_EQ(::mkfifo(SpecPath("uid-fifo").c_str(), 0644), 0);
  ASSERT_EQ(::symlink("/dev/zero", SpecPath("uid-zero").c_str()), 0);
  reconciler_->RunOnce();
  EXPECT_FALSE(*ledger_->ClaimsMayBeMissing());
  EXPECT_FALSE(Entry("uid-dir").has_value());
  EXPECT_FALSE(Entry("uid-fifo").has_value());
  EXPECT_FALSE(Entry("uid-zero").has_value());
}

// The Go driver's spec of a claim it prepared (.yaml) is a prepared claim's
// like ours: while claims may be missing it is kept and its entry rebuilt.
TEST_F(EngineTest, ALostLedgerKeepsAndRebuildsAClaimFromTheGoDriversYamlSpec) {
  LoseLedgerAndRestart();
  ASSERT_TRUE(*ledger_->ClaimsMayBeMissing());
  const std::string go_spec = dir_ + "/cdi/k8s.gpu.nvidia.com-claim_uid-go.yaml";
  ASSERT_TRUE(WriteFileAtomically(go_spec, "---\ncdiVersion: 0.5.0\nkind: k8s.gpu.nvidia.com/claim\ndevices:\n"
                                           "- name: uid-go-gpu-2\n  containerEdits:\n    deviceNodes:\n"
                                           "    - path: /dev/nvidia2\n")
                  .ok());

  auto rep = reconciler_->RunOnce();
  EXPECT_EQ(rep.errors, 0);
  EXPECT_EQ(rep.orphan_specs_removed, 0);
  EXPECT_TRUE(PathExists(go_spec)) << "a spec kept while claims may be missing is never swept";
  auto e = Entry("uid-go");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->state, ledger::ClaimState::kPrepareCompleted);
  EXPECT_FALSE(*ledger_->ClaimsMayBeMissing());
  auto c = Claim("uid-c", "c", {"gpu-2"});
  claims_.Put(c);
  auto refused = engine_->PrepareClaim(Ref(c), kFar);
  EXPECT_NE(refused.status().message().find("uid-go"), std::string::npos) << refused.status().message();
  rep = reconciler_->RunOnce();
  EXPECT_TRUE(PathExists(go_spec)) << "the rebuilt claim's spec stays";
}

// Every spec names its claim, so an entry rebuilt from it can be checked.
// A spec copied under another UID (its devices and name variable renamed to
// that UID) loses to the claim it was copied from: whichever the recovery
// reads first, the copy's claim is not the API server's, so the real claim
// is rebuilt, its next Prepare succeeds, and the copy is swept.
TEST_F(EngineTest, ACopiedSpecUnderAnotherUidLosesToTheLiveClaim) {
  const std::string real = "00000000-0000-0000-0000-000000000001";
  const std::string copy = "00000000-0000-0000-0000-000000000000";
  auto a = Claim(real, "a", {"gpu-0"});
  claims_.Put(a);
  ASSERT_EQ(engine_->PrepareClaim(Ref(a), kFar).status().message(), "");
  auto text = ReadFileToString(SpecPath(real));
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find(cdi::CdiSpecWriter::ClaimRefEnv(real) + "=default/a"), std::string::npos) << *text;
  // The copy: every mention of the UID (device names, the variable) renamed.
  std::string copied = *text;
  std::string real_env = real, copy_env = copy;
  std::replace(real_env.begin(), real_env.end(), '-', '_');
  std::replace(copy_env.begin(), copy_env.end(), '-', '_');
  for (auto [from, to] : {std::pair{real, copy}, std::pair{real_env, copy_env}}) {
    for (size_t at = copied.find(from); at != std::string::npos; at = copied.find(from, at + to.size())) {
      copied.replace(at, from.size(), to);
    }
  }
  ASSERT_TRUE(WriteFileAtomically(SpecPath(copy), copied).ok());
  LoseLedgerAndRestart();

  auto rep = reconciler_->RunOnce();
  EXPECT_EQ(rep.errors, 0);
  EXPECT_FALSE(*ledger_->ClaimsMayBeMissing());
  auto e = Entry(real);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->state, ledger::ClaimState::kPrepareCompleted);
  EXPECT_EQ(e->name, "a");
  auto held = ledger_->HolderOf("gpu-0");
  ASSERT_TRUE(held.ok() && held->has_value());
  EXPECT_EQ((*held)->uid, real);
  EXPECT_FALSE(PathExists(SpecPath(copy))) << "the copy is an orphan once the recovery is over";
  auto again = engine_->PrepareClaim(Ref(a), kFar);
  ASSERT_EQ(again.status().message(), "");
  EXPECT_EQ(again.value()[0].device, "gpu-0");
}

// An orphan spec (a deleted claim) and a lost ledger: the rebuilt entry
// holds its GPU only until the reconciler has checked it. Named (as every
// spec is now), its claim is gone and it is released after the grace
// period; a spec of an older version that names no claim is released after
// the grace period too, with a line that says why, instead of forever.
TEST_F(EngineTest, AnOrphanSpecAfterALostLedgerHoldsItsDeviceOnlyUntilTheGracePeriodEnds) {
  auto gone = Claim("uid-gone", "gone", {"gpu-3"});
  claims_.Put(gone);
  ASSERT_EQ(engine_->PrepareClaim(Ref(gone), kFar).status().message(), "");
  claims_.Remove("default", "gone");
  // An older version's spec of another deleted claim: no name in it.
  cdi::Spec old_spec = cdi_->BuildClaimSpec("uid-unnamed", {{"gpu-4", {}}});
  old_spec.devices[0].edits.env = {"X=1"};
  ASSERT_TRUE(cdi_->WriteClaimSpec("uid-unnamed", old_spec).ok());
  LoseLedgerAndRestart();

  auto rep = reconciler_->RunOnce();
  EXPECT_FALSE(*ledger_->ClaimsMayBeMissing());
  ASSERT_TRUE(Entry("uid-gone").has_value());
  EXPECT_EQ(Entry("uid-gone")->name, "gone") << "the spec named its claim";
  ASSERT_TRUE(Entry("uid-unnamed").has_value());
  auto c3 = Claim("uid-c3", "c3", {"gpu-3"});
  auto c4 = Claim("uid-c4", "c4", {"gpu-4"});
  claims_.Put(c3);
  claims_.Put(c4);
  // Within the grace period (from the first pass that checks them) both
  // still hold their devices.
  reconciler_->RunOnce();
  EXPECT_NE(engine_->PrepareClaim(Ref(c4), kFar).status().message().find("uid-unnamed"), std::string::npos);
  clock_.Advance(std::chrono::minutes(5));
  reconciler_->RunOnce();
  EXPECT_TRUE(Entry("uid-unnamed").has_value() && ledger::HoldsResources(Entry("uid-unnamed")->state));
  clock_.Advance(std::chrono::minutes(6));
  rep = reconciler_->RunOnce();
  EXPECT_EQ(rep.errors, 0);
  for (const char* uid : {"uid-gone", "uid-unnamed"}) {
    auto e = Entry(uid);
    EXPECT_TRUE(!e.has_value() || !ledger::HoldsResources(e->state)) << uid << " still holds its device";
    EXPECT_FALSE(PathExists(SpecPath(uid))) << uid;
  }
  EXPECT_EQ(engine_->PrepareClaim(Ref(c3), kFar).status().message(), "");
  EXPECT_EQ(engine_->PrepareClaim(Ref(c4), kFar).status().message(), "");
}

// One ResourceClaim shared by 15 pods: after its first Prepare, every
// repeated Prepare of it (same UID and name, completed in this boot) is
// answered from the ledger without a GET, so none waits for the client's
// rate limiter, and an API server that is down meanwhile does not matter.
// A claim of another boot, or one the kubelet names differently, still
// asks the API server.
TEST_F(EngineTest, ARepeatedPrepareOfAClaimCompletedInThisBootAsksNoApiServer) {
  auto a = Claim("uid-a", "a", {"gpu-0"});
  claims_.Put(a);
  auto first = engine_->PrepareClaim(Ref(a), kFar);
  ASSERT_EQ(first.status().message(), "");
  const int gets = claims_.gets();
  EXPECT_EQ(gets, 1);
  claims_.FailWith(Unavailable("API server down"));
  for (int pod = 0; pod < 15; ++pod) {
    auto again = engine_->PrepareClaim(Ref(a), kFar);
    ASSERT_EQ(again.status().message(), "") << pod;
    ASSERT_EQ(again->size(), 1u);
    EXPECT_EQ((*again)[0].device, "gpu-0");
    EXPECT_EQ((*again)[0].cdi_device_ids, (*first)[0].cdi_device_ids);
  }
  EXPECT_EQ(claims_.gets(), gets) << "a repeated Prepare asked the API server";
  EXPECT_TRUE(PathExists(SpecPath("uid-a")));
  // The same UID under another name is not the recorded claim: asked.
  auto renamed = engine_->PrepareClaim({"default", "uid-a", "other"}, kFar);
  EXPECT_FALSE(renamed.ok());
  EXPECT_EQ(claims_.gets(), gets + 1);
  // After a reboot the node work is redone, from what the API server says.
  claims_.FailWith(Status::Ok());
  reconciler_.reset();
  engine_.reset();
  ledger_.reset();
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/boot_id", "boot-2\n").ok());
  Reopen();
  ASSERT_EQ(engine_->PrepareClaim(Ref(a), kFar).status().message(), "");
  EXPECT_EQ(claims_.gets(), gets + 2);
}

}  // namespace
}  // namespace nvdra::driver
