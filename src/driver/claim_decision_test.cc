#include "driver/claim_decision.h"

#include <gtest/gtest.h>

namespace nvdra::driver {
namespace {

using namespace std::chrono_literals;
using ledger::ClaimState;

constexpr const char* kGpuDriver = "gpu.nvidia.com";
const auto kT0 = std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000));

model::AllocationResult Res(const std::string& device, const std::string& pool = "node-a",
                            const std::string& driver = kGpuDriver) {
  return {"req", driver, pool, device, false, ""};
}

ledger::ClaimEntry Entry(ClaimState state, std::vector<model::AllocationResult> allocation = {Res("gpu-0")}) {
  ledger::ClaimEntry e;
  e.uid = "uid-a";
  e.ns = "default";
  e.name = "a";
  e.state = state;
  e.allocation = std::move(allocation);
  return e;
}

ClaimSnapshot Snapshot(std::vector<model::AllocationResult> results = {Res("gpu-0")},
                       const std::string& uid = "uid-a") {
  ClaimSnapshot c;
  c.uid = uid;
  c.ns = "default";
  c.name = "a";
  c.allocated = true;
  c.results = std::move(results);
  return c;
}

TEST(JudgeClaimTest, Table) {
  ClaimSnapshot deallocated = Snapshot({});
  deallocated.allocated = false;
  ClaimSnapshot with_other_driver = Snapshot({Res("gpu-0"), Res("nic-0", "node-a", "net.example.com")});
  ledger::ClaimEntry imported = Entry(ClaimState::kPrepareCompleted, {});
  ledger::ClaimEntry unnamed = Entry(ClaimState::kPrepareStarted);
  unnamed.name = "";
  struct Case {
    const char* name;
    ledger::ClaimEntry entry;
    Result<ClaimSnapshot> current;
    ClaimStanding want;
  };
  const Case cases[] = {
      {"same claim, same allocation", Entry(ClaimState::kPrepareCompleted), Snapshot(), ClaimStanding::kCurrent},
      {"other drivers' results do not count", Entry(ClaimState::kPrepareCompleted), with_other_driver,
       ClaimStanding::kCurrent},
      {"results in another order", Entry(ClaimState::kPrepareCompleted, {Res("gpu-0"), Res("gpu-1")}),
       Snapshot({Res("gpu-1"), Res("gpu-0")}), ClaimStanding::kCurrent},
      {"not found", Entry(ClaimState::kPrepareStarted), NotFound("resourceclaims \"a\" not found"),
       ClaimStanding::kGone},
      {"replaced under the same name", Entry(ClaimState::kPrepareStarted), Snapshot({Res("gpu-0")}, "uid-b"),
       ClaimStanding::kGone},
      {"deallocated", Entry(ClaimState::kPrepareCompleted), deallocated, ClaimStanding::kStale},
      {"allocated again with another device", Entry(ClaimState::kPrepareCompleted), Snapshot({Res("gpu-1")}),
       ClaimStanding::kStale},
      {"allocated to another node", Entry(ClaimState::kPrepareCompleted, {Res("gpu-0", "node-b")}),
       Snapshot({Res("gpu-0", "node-b")}), ClaimStanding::kStale},
      {"API error", Entry(ClaimState::kPrepareStarted), Unavailable("503"), ClaimStanding::kUnknown},
      {"no name recorded", unnamed, Snapshot(), ClaimStanding::kUnnamed},
      {"imported without allocation", imported, Snapshot(), ClaimStanding::kCurrent},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(JudgeClaim(c.entry, c.current, "node-a").standing, c.want) << c.name;
  }
  // Without a node name the node is not checked.
  EXPECT_EQ(JudgeClaim(Entry(ClaimState::kPrepareCompleted, {Res("gpu-0", "node-b")}),
                       Snapshot({Res("gpu-0", "node-b")}), "")
                .standing,
            ClaimStanding::kCurrent);
}

TEST(DecideTest, Table) {
  struct Case {
    const char* name;
    ClaimState state;
    Result<ClaimSnapshot> current;
    std::optional<std::chrono::system_clock::time_point> gone_since;
    Action want;
    bool grace_started;
  };
  const Case cases[] = {
      {"current prepared claim", ClaimState::kPrepareCompleted, Snapshot(), std::nullopt, Action::kKeep, false},
      {"current half-prepared claim", ClaimState::kPrepareStarted, Snapshot(), std::nullopt, Action::kKeep, false},
      {"API error", ClaimState::kPrepareStarted, Unavailable("503"), std::nullopt, Action::kRetryLater, false},
      {"half-prepared, gone", ClaimState::kPrepareStarted, NotFound("x"), std::nullopt, Action::kUnprepare, false},
      {"half-unprepared, gone", ClaimState::kUnprepareStarted, NotFound("x"), std::nullopt, Action::kUnprepare, false},
      {"half-prepared, deallocated", ClaimState::kPrepareStarted, Snapshot({Res("gpu-3")}), std::nullopt,
       Action::kUnprepare, false},
      {"prepared, gone: grace starts", ClaimState::kPrepareCompleted, NotFound("x"), std::nullopt, Action::kWaitGrace,
       true},
      {"prepared, gone within grace", ClaimState::kPrepareCompleted, NotFound("x"), kT0 - 5min, Action::kWaitGrace,
       false},
      {"prepared, gone past grace", ClaimState::kPrepareCompleted, NotFound("x"), kT0 - 10min, Action::kUnprepare,
       false},
      {"prepared, stale past grace", ClaimState::kPrepareCompleted, Snapshot({Res("gpu-3")}), kT0 - 11min,
       Action::kUnprepare, false},
      {"tombstone", ClaimState::kTombstone, NotFound("x"), std::nullopt, Action::kKeep, false},
  };
  for (const auto& c : cases) {
    DecideInput in{"node-a", kT0, c.gone_since, 10min};
    Decision d = Decide(Entry(c.state), c.current, in);
    EXPECT_EQ(ActionName(d.action), std::string(ActionName(c.want))) << c.name;
    EXPECT_EQ(d.grace_started, c.grace_started) << c.name;
  }
}

TEST(DecideTest, APreparedClaimOfAnEarlierBootWhoseClaimIsGoneOrStaleIsReleasedAtOnce) {
  DecideInput in{"node-a", kT0, std::nullopt, 10min};
  auto e = Entry(ClaimState::kPrepareCompleted);
  e.from_earlier_boot = true;
  Decision gone = Decide(e, NotFound("x"), in);
  EXPECT_EQ(gone.action, Action::kUnprepare);
  EXPECT_EQ(gone.judgement.why, "its ResourceClaim no longer exists (prepared before the node rebooted)");
  EXPECT_EQ(Decide(e, Snapshot({Res("gpu-0", "node-b")}), in).action, Action::kUnprepare);
  EXPECT_EQ(Decide(e, Snapshot(), in).action, Action::kKeep)
      << "still this node's claim: the kubelet prepares it again";
  EXPECT_EQ(Decide(e, Unavailable("down"), in).action, Action::kRetryLater);
  e.from_earlier_boot = false;
  EXPECT_EQ(Decide(e, NotFound("x"), in).action, Action::kWaitGrace) << "this boot's: the kubelet may still come";
}

TEST(DecideTest, NoGraceUnpreparesAPreparedClaimAtOnce) {
  DecideInput in{"node-a", kT0, std::nullopt, 0ms};
  EXPECT_EQ(Decide(Entry(ClaimState::kPrepareCompleted), NotFound("x"), in).action, Action::kUnprepare);
}

// An entry without a claim name can never be checked: it is kept through
// the grace period from the first pass that sees it, then released, in
// every state, instead of holding its devices forever.
TEST(DecideTest, AnEntryWithoutANameIsReleasedAfterTheGracePeriod) {
  for (ClaimState state : {ClaimState::kPrepareCompleted, ClaimState::kPrepareStarted}) {
    auto e = Entry(state);
    e.name = "";
    Decision first = Decide(e, Unavailable("not asked"), DecideInput{"node-a", kT0, std::nullopt, 10min});
    EXPECT_EQ(first.action, Action::kCannotCheck);
    EXPECT_TRUE(first.grace_started);
    Decision within = Decide(e, Unavailable("not asked"), DecideInput{"node-a", kT0, kT0 - 9min, 10min});
    EXPECT_EQ(within.action, Action::kCannotCheck);
    EXPECT_FALSE(within.grace_started);
    Decision past = Decide(e, Unavailable("not asked"), DecideInput{"node-a", kT0, kT0 - 10min, 10min});
    EXPECT_EQ(past.action, Action::kUnprepare);
    EXPECT_EQ(past.judgement.why, "the ledger records no claim name and no Prepare brought one");
    EXPECT_EQ(Decide(e, Unavailable("not asked"), DecideInput{"node-a", kT0, std::nullopt, 0ms}).action,
              Action::kUnprepare);
  }
}

}  // namespace
}  // namespace nvdra::driver
