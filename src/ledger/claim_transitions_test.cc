#include "ledger/claim_transitions.h"

#include <map>

#include <gtest/gtest.h>

#include <limits>

#include "ledger/lost_claim_recovery.h"

namespace nvdra::ledger {
namespace {

using namespace std::chrono_literals;

const auto kT0 = std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000));
constexpr const char* kUid = "7a4e1a8e-0000-4000-8000-000000000001";
constexpr const char* kOther = "7a4e1a8e-0000-4000-8000-000000000002";

AllocatedDevice Res(const std::string& device) { return {"req", "gpu.nvidia.com", "node-a", device, false, ""}; }

std::optional<ClaimEntry> Entry(ClaimState state, std::vector<AllocatedDevice> allocation = {Res("gpu-0")}) {
  ClaimEntry e;
  e.uid = kUid;
  e.ns = "default";
  e.name = "a";
  e.state = state;
  e.allocation = std::move(allocation);
  if (HoldsResources(state)) e.held = DefaultHeld(e.allocation);
  e.attempt = "attempt-old";
  e.boot_id = "boot-now";
  e.updated = kT0 - 10s;
  return e;
}

enum class Op {
  kPrepare,
  kPrepareReserved,
  kPrepareOther,
  kPrepareHeldElsewhere,
  kComplete,
  kCompleteSuperseded,
  kCompleteOtherDevices,
  kUnprepare,
  kFinish,
  kAdoptName,
  kRebuild,
  kRebuildHeldElsewhere
};

struct Want {
  StatusCode code = StatusCode::kOk;
  bool write = false;
  std::optional<ClaimState> state;  // of the entry after the transition; nullopt: none
  BeginOutcome outcome = BeginOutcome::kStarted;
  std::string message = {};  // the whole error message, when set
};

Want Ok(bool write, std::optional<ClaimState> state, BeginOutcome outcome = BeginOutcome::kStarted) {
  return Want{StatusCode::kOk, write, state, outcome, ""};
}
Want Err(StatusCode code, std::string message = "") {
  return Want{code, false, std::nullopt, BeginOutcome::kStarted, std::move(message)};
}

Result<Transition> Apply(Op op, const std::optional<ClaimEntry>& cur, const TransitionContext& ctx) {
  const ClaimEntry* c = cur ? &*cur : nullptr;
  BeginPrepareRequest req{kUid, "default", "a", {Res("gpu-0")}, std::nullopt, nullptr, {}};
  std::vector<PreparedDevice> prepared = c != nullptr ? c->prepared : std::vector<PreparedDevice>{};
  RebuiltClaim rebuilt;
  rebuilt.uid = kUid;
  rebuilt.devices = {"gpu-0"};
  switch (op) {
    case Op::kPrepare: return transition::BeginPrepare(c, req, ctx);
    case Op::kPrepareReserved:
      req.consumers = {"pod-b", "pod-a", "pod-b"};
      return transition::BeginPrepare(c, req, ctx);
    case Op::kPrepareOther: req.allocation = {Res("gpu-1")}; return transition::BeginPrepare(c, req, ctx);
    case Op::kPrepareHeldElsewhere: req.allocation = {Res("gpu-7")}; return transition::BeginPrepare(c, req, ctx);
    case Op::kComplete: return transition::CompletePrepare(c, kUid, prepared, nullptr, "attempt-old", ctx);
    case Op::kCompleteSuperseded: return transition::CompletePrepare(c, kUid, prepared, nullptr, "attempt-x", ctx);
    case Op::kCompleteOtherDevices:
      return transition::CompletePrepare(c, kUid, {PreparedDevice{{"req"}, "node-a", "gpu-9", {}, ""}}, nullptr,
                                         std::nullopt, ctx);
    case Op::kUnprepare: return transition::BeginUnprepare(c, ctx);
    case Op::kFinish: return transition::FinishUnprepare(c, ctx);
    case Op::kAdoptName: return transition::AdoptName(c, "team", "b", ctx);
    case Op::kRebuild: return RebuildTransition(c, rebuilt, ctx);
    case Op::kRebuildHeldElsewhere: rebuilt.devices = {"gpu-7"}; return RebuildTransition(c, rebuilt, ctx);
  }
  return Internal("unreachable");
}

TransitionContext Context(const std::map<std::string, std::string>& holders) {
  TransitionContext ctx;
  ctx.boot_id = "boot-now";
  ctx.now = kT0;
  ctx.tombstone_ttl = 300s;
  ctx.new_attempt = "attempt-new";
  ctx.other_holder = [holders](const std::string& r, const std::string& except) -> std::optional<std::string> {
    auto it = holders.find(r);
    if (it == holders.end() || it->second == except) return std::nullopt;
    return it->second;
  };
  return ctx;
}

// Every state an entry can be in when a request comes.
struct States {
  std::optional<ClaimEntry> none, started, completed, earlier, unpreparing, tombstone, newer, unnamed, rebuilt;
};

States AllStates() {
  States s;
  s.started = Entry(ClaimState::kPrepareStarted);
  s.completed = Entry(ClaimState::kPrepareCompleted);
  s.completed->prepared = {PreparedDevice{{"req"}, "node-a", "gpu-0", {"k8s.gpu.nvidia.com/claim=x"}, ""}};
  s.earlier = s.completed;
  s.earlier->boot_id = "boot-old";
  s.unpreparing = Entry(ClaimState::kUnprepareStarted);
  s.tombstone = Entry(ClaimState::kTombstone);
  s.newer = Entry(ClaimState::kPrepareStarted);  // a state a newer version wrote
  s.newer->unknown_state = "PrepareVerified";
  s.unnamed = s.completed;
  s.unnamed->name = s.unnamed->ns = "";
  s.rebuilt = Entry(ClaimState::kPrepareCompleted, {});
  s.rebuilt->name = "";
  s.rebuilt->undo = {{"rebuilt", {{"from", "cdi spec"}}}};
  s.rebuilt->origin = ClaimOrigin::kRebuilt;
  return s;
}

struct Case {
  const char* name;
  std::optional<ClaimEntry> cur;
  Op op;
  Want want;
};

std::vector<Case> Cases() {
  const States st = AllStates();
  const auto& [none, started, completed, earlier, unpreparing, tombstone, newer, unnamed, rebuilt] = st;
  const std::string different = std::string("claim default/a:") + kUid +
                                " is already recorded as PrepareCompleted for a different allocation; refusing to "
                                "overwrite it (unprepare the claim first)";
  const std::string conflict = std::string("gpu-7 already allocated by claim ") + kOther + " (according to checkpoint)";
  using S = ClaimState;
  using O = BeginOutcome;
  constexpr auto kPre = StatusCode::kFailedPrecondition;
  return {
      // BeginPrepare
      {"fresh claim starts", none, Op::kPrepare, Ok(true, S::kPrepareStarted, O::kStarted)},
      {"fresh claim, device held by another", none, Op::kPrepareHeldElsewhere, Err(StatusCode::kConflict, conflict)},
      {"started is retried with a new attempt", started, Op::kPrepare, Ok(true, S::kPrepareStarted, O::kRetry)},
      {"completed in this boot is an idempotent hit", completed, Op::kPrepare,
       Ok(false, S::kPrepareCompleted, O::kAlreadyPrepared)},
      {"completed in an earlier boot is redone", earlier, Op::kPrepare,
       Ok(true, S::kPrepareCompleted, O::kRedoAfterReboot)},
      {"completed, other allocation", completed, Op::kPrepareOther, Err(kPre, different)},
      {"unpreparing refuses", unpreparing, Op::kPrepare, Err(kPre)},
      {"tombstone refuses a late retry", tombstone, Op::kPrepare, Err(kPre)},
      {"tombstone, reserved for a pod: starts again", tombstone, Op::kPrepareReserved,
       Ok(true, S::kPrepareStarted, O::kStarted)},
      {"tombstone, new allocation: starts afresh", tombstone, Op::kPrepareOther,
       Ok(true, S::kPrepareStarted, O::kStarted)},
      {"newer version's state acts as started", newer, Op::kPrepare, Ok(true, S::kPrepareStarted, O::kRetry)},
      {"rebuilt without allocation adopts the request's", rebuilt, Op::kPrepare,
       Ok(true, S::kPrepareStarted, O::kRetry)},
      {"rebuilt, device held by another", rebuilt, Op::kPrepareHeldElsewhere, Err(StatusCode::kConflict, conflict)},
      // CompletePrepare
      {"complete unknown", none, Op::kComplete, Err(kPre)},
      {"complete started", started, Op::kComplete, Ok(true, S::kPrepareCompleted)},
      {"complete superseded attempt", started, Op::kCompleteSuperseded, Err(kPre)},
      {"complete again in this boot", completed, Op::kComplete, Ok(false, S::kPrepareCompleted)},
      {"complete after a reboot rewrites the boot", earlier, Op::kComplete, Ok(true, S::kPrepareCompleted)},
      {"complete with other devices", completed, Op::kCompleteOtherDevices, Err(kPre)},
      {"complete unpreparing", unpreparing, Op::kComplete, Err(kPre)},
      {"complete tombstone", tombstone, Op::kComplete, Err(kPre)},
      // BeginUnprepare
      {"unprepare unknown", none, Op::kUnprepare, Ok(false, std::nullopt)},
      {"unprepare started", started, Op::kUnprepare, Ok(true, S::kUnprepareStarted)},
      {"unprepare completed", completed, Op::kUnprepare, Ok(true, S::kUnprepareStarted)},
      {"unprepare again", unpreparing, Op::kUnprepare, Ok(false, S::kUnprepareStarted)},
      {"unprepare tombstone", tombstone, Op::kUnprepare, Ok(false, std::nullopt)},
      // FinishUnprepare
      {"finish unknown", none, Op::kFinish, Ok(false, std::nullopt)},
      {"finish started", started, Op::kFinish, Err(kPre)},
      {"finish completed", completed, Op::kFinish, Err(kPre)},
      {"finish unpreparing", unpreparing, Op::kFinish, Ok(true, S::kTombstone)},
      {"finish tombstone", tombstone, Op::kFinish, Ok(false, std::nullopt)},
      // AdoptName
      {"name for unknown", none, Op::kAdoptName, Ok(false, std::nullopt)},
      {"name kept", completed, Op::kAdoptName, Ok(false, std::nullopt)},
      {"name adopted", unnamed, Op::kAdoptName, Ok(true, S::kPrepareCompleted)},
      {"name for tombstone", tombstone, Op::kAdoptName, Ok(false, std::nullopt)},
      // RebuildEntry
      {"rebuild unknown", none, Op::kRebuild, Ok(true, S::kPrepareCompleted)},
      {"rebuild over tombstone", tombstone, Op::kRebuild, Ok(true, S::kPrepareCompleted)},
      {"rebuild known", started, Op::kRebuild, Ok(false, std::nullopt)},
      {"rebuild, device held by another", none, Op::kRebuildHeldElsewhere,
       Err(StatusCode::kConflict, conflict + "; not rebuilding claim " + kUid)},
  };
}

TEST(ClaimTransitionsTest, Table) {
  const TransitionContext ctx = Context({{"gpu-7", kOther}});
  for (const auto& c : Cases()) {
    auto got = Apply(c.op, c.cur, ctx);
    ASSERT_EQ(got.status().code(), c.want.code) << c.name << ": " << got.status().ToString();
    if (!c.want.message.empty()) EXPECT_EQ(got.status().message(), c.want.message) << c.name;
    if (!got.ok()) continue;
    EXPECT_EQ(got->write, c.want.write) << c.name;
    ASSERT_EQ(got->entry.has_value(), c.want.state.has_value()) << c.name;
    if (got->entry) EXPECT_EQ(got->entry->state, *c.want.state) << c.name;
    if (c.op == Op::kPrepare || c.op == Op::kPrepareOther || c.op == Op::kPrepareReserved) {
      EXPECT_EQ(got->outcome, c.want.outcome) << c.name;
      EXPECT_EQ(got->entry->attempt, got->write ? "attempt-new" : "attempt-old") << c.name;
    }
    if (got->write) EXPECT_EQ(got->entry->updated, kT0) << c.name;
  }
}

TEST(ClaimTransitionsTest, WhatTheRecordsSay) {
  TransitionContext ctx;
  ctx.boot_id = "boot-now";
  ctx.now = kT0;
  ctx.tombstone_ttl = 300s;
  ctx.new_attempt = "attempt-new";
  BeginPrepareRequest req{kUid, "default", "a", {Res("gpu-1"), Res("gpu-0")}, std::nullopt, {{"k", 1}}, {"b", "a"}};
  auto fresh = transition::BeginPrepare(nullptr, req, ctx);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->entry->held, (std::vector<std::string>{"gpu-0", "gpu-1"}));
  EXPECT_EQ(fresh->entry->consumers, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(fresh->entry->boot_id, "boot-now");
  EXPECT_EQ(fresh->entry->undo, nlohmann::json({{"k", 1}}));
  // The refusal of a tombstone says when it expires.
  auto tombstone = Entry(ClaimState::kTombstone);
  auto refused = transition::BeginPrepare(&*tombstone, {kUid, "", "", {Res("gpu-0")}, std::nullopt, nullptr, {}}, ctx);
  EXPECT_NE(refused.status().message().find("(the refusal expires in 290s)"), std::string::npos)
      << refused.status().message();
  // A tombstone keeps the allocation and consumers, nothing it held.
  auto unpreparing = Entry(ClaimState::kUnprepareStarted);
  unpreparing->consumers = {"a"};
  auto gone = transition::FinishUnprepare(&*unpreparing, ctx);
  EXPECT_TRUE(gone->entry->held.empty());
  EXPECT_TRUE(gone->entry->undo.is_null());
  EXPECT_EQ(gone->entry->allocation, unpreparing->allocation);
  EXPECT_EQ(gone->entry->consumers, unpreparing->consumers);
  // A rebuilt entry: the CDI ids of each device, of this boot.
  RebuiltClaim c;
  c.uid = kUid;
  c.devices = {"gpu-0"};
  c.cdi_device_ids = {std::string("k8s.gpu.nvidia.com/claim=") + kUid + "-gpu-0", "k8s.gpu.nvidia.com/claim=x-gpu-1"};
  auto r = RebuildTransition(nullptr, c, ctx);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->entry->prepared.size(), 1u);
  EXPECT_EQ(r->entry->prepared[0].cdi_device_ids, std::vector<std::string>{c.cdi_device_ids[0]});
  EXPECT_EQ(r->entry->undo["rebuilt"]["from"], "cdi");
  EXPECT_EQ(r->entry->boot_id, "boot-now");
}

// The origin follows the undo record: a Prepare that adopts a rebuilt
// entry without a record of its own keeps it, and a completion with the
// kind's record makes the entry the plugin's own.
TEST(ClaimTransitionsTest, TheOriginFollowsTheUndoRecord) {
  TransitionContext ctx;
  ctx.boot_id = "boot-now";
  ctx.now = kT0;
  ctx.new_attempt = "attempt-new";
  RebuiltClaim c;
  c.uid = kUid;
  c.devices = {"gpu-0"};
  c.source = "cdi spec";
  auto rebuilt = RebuildTransition(nullptr, c, ctx);
  ASSERT_TRUE(rebuilt.ok());
  EXPECT_EQ(rebuilt->entry->origin, ClaimOrigin::kRebuilt);
  // The first Prepare brings the allocation; without a record of its own
  // the rebuilt one stays, and with it the origin.
  BeginPrepareRequest req{kUid, "default", "a", {Res("gpu-0")}, std::nullopt, nullptr, {}};
  auto adopted = transition::BeginPrepare(&*rebuilt->entry, req, ctx);
  ASSERT_TRUE(adopted.ok()) << adopted.status().ToString();
  EXPECT_EQ(adopted->outcome, BeginOutcome::kRetry);
  EXPECT_EQ(adopted->entry->origin, ClaimOrigin::kRebuilt);
  auto kept = transition::CompletePrepare(&*adopted->entry, kUid, {}, nullptr, std::nullopt, ctx);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(kept->entry->origin, ClaimOrigin::kRebuilt);
  auto own = transition::CompletePrepare(&*adopted->entry, kUid, {}, {{"devices", {"gpu-0"}}}, std::nullopt, ctx);
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  EXPECT_EQ(own->entry->origin, ClaimOrigin::kPrepare);
  // A Prepare with the kind's record starts the plugin's own entry.
  req.undo = {{"devices", {"gpu-0"}}};
  auto fresh = transition::BeginPrepare(&*rebuilt->entry, req, ctx);
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_EQ(fresh->entry->origin, ClaimOrigin::kPrepare);
}

// The rule of shared devices as a pure function: what one claim consumes of
// a device is the sum of its shares of it, and a tombstone holds no share.
TEST(ClaimTransitionsTest, SharesOfOneClaimOnOneDeviceAddUpAndTombstonesHoldNoShare) {
  ClaimEntry other = *Entry(ClaimState::kPrepareCompleted);
  other.uid = kOther;
  other.shares = {{"gpu-0", "s-1", {{"memory", 60}}, {{"memory", 100}}, "cfg"}};
  TransitionContext ctx;
  ctx.other_holders = [&other](const std::string& r, const std::string& except) {
    return r == "gpu-0" && except != other.uid ? std::vector<const ClaimEntry*>{&other}
                                               : std::vector<const ClaimEntry*>{};
  };
  std::vector<HeldShare> two = {{"gpu-0", "s-2", {{"memory", 20}}, {{"memory", 100}}, "cfg"},
                                {"gpu-0", "s-3", {{"memory", 20}}, {{"memory", 100}}, "cfg"}};
  EXPECT_TRUE(CheckHeldAgainstOthers({"gpu-0"}, {"gpu-0"}, two, kUid, ctx).ok());
  two[1].consumed["memory"] = 21;
  EXPECT_EQ(CheckHeldAgainstOthers({"gpu-0"}, {"gpu-0"}, two, kUid, ctx).message(),
            std::string("requested device gpu-0 has no room for claim ") + kUid + ": it publishes memory 100, claims " +
                kOther + " already consume 60 (according to checkpoint) and this claim consumes 41");
  // Without the holders' entries the rule is the exclusive one.
  TransitionContext exclusive;
  exclusive.other_holder = [](const std::string&, const std::string&) { return std::optional<std::string>(kOther); };
  EXPECT_EQ(CheckHeldAgainstOthers({"gpu-0"}, {"gpu-0"}, two, kUid, exclusive).code(), StatusCode::kConflict);
  // A share does not outlive its claim: the tombstone drops it.
  ClaimEntry unpreparing = other;
  unpreparing.state = ClaimState::kUnprepareStarted;
  auto gone = transition::FinishUnprepare(&unpreparing, ctx);
  ASSERT_TRUE(gone.ok());
  EXPECT_TRUE(gone->entry->shares.empty());
}

// A share is checked against the device's capacity also when no other
// claim holds the device, with sums that cannot wrap, and a negative amount
// makes no room.
TEST(ClaimTransitionsTest, ALoneShareIsCheckedAgainstTheCapacityWithoutWrapping) {
  TransitionContext ctx;
  ctx.other_holders = [](const std::string&, const std::string&) { return std::vector<const ClaimEntry*>{}; };
  constexpr int64_t kCap = 85520809984, kFourEi = int64_t{4} << 60;
  std::vector<HeldShare> huge = {{"gpu-0", "s-1", {{"memory", kFourEi}}, {{"memory", kCap}}, "cfg"}};
  EXPECT_EQ(CheckHeldAgainstOthers({"gpu-0"}, {"gpu-0"}, huge, kUid, ctx).message(),
            std::string("requested device gpu-0 has no room for claim ") + kUid +
                ": it publishes memory 85520809984 and this claim consumes 4611686018427387904");
  // Two shares of the claim whose sum passes the int64 range.
  std::vector<HeldShare> wrap = {huge[0], huge[0]};
  wrap[0].consumed["memory"] = std::numeric_limits<int64_t>::max();
  wrap[1].share_id = "s-2";
  EXPECT_EQ(CheckHeldAgainstOthers({"gpu-0"}, {"gpu-0"}, wrap, kUid, ctx).code(), StatusCode::kConflict);
  std::vector<HeldShare> negative = {{"gpu-0", "s-1", {{"memory", -kCap}}, {{"memory", kCap}}, "cfg"},
                                     {"gpu-0", "s-2", {{"memory", kCap}}, {{"memory", kCap}}, "cfg"}};
  EXPECT_EQ(CheckHeldAgainstOthers({"gpu-0"}, {"gpu-0"}, negative, kUid, ctx).message(),
            std::string("requested device gpu-0: claim ") + kUid + " consumes memory -85520809984, a negative amount");
  std::vector<HeldShare> whole = {{"gpu-0", "s-1", {{"memory", kCap}}, {{"memory", kCap}}, "cfg"}};
  EXPECT_TRUE(CheckHeldAgainstOthers({"gpu-0"}, {"gpu-0"}, whole, kUid, ctx).ok());
  // A negative share held by another claim (a damaged or foreign record)
  // makes no room for this one.
  ClaimEntry other = *Entry(ClaimState::kPrepareCompleted);
  other.uid = kOther;
  other.shares = {{"gpu-0", "s-9", {{"memory", -kCap}}, {{"memory", kCap}}, "cfg"}};
  ctx.other_holders = [&other](const std::string&, const std::string&) {
    return std::vector<const ClaimEntry*>{&other};
  };
  EXPECT_TRUE(CheckHeldAgainstOthers({"gpu-0"}, {"gpu-0"}, whole, kUid, ctx).ok());
  whole[0].consumed["memory"] = kCap + 1;
  EXPECT_EQ(CheckHeldAgainstOthers({"gpu-0"}, {"gpu-0"}, whole, kUid, ctx).code(), StatusCode::kConflict);
}

}  // namespace
}  // namespace nvdra::ledger
