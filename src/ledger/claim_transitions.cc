#include "ledger/claim_transitions.h"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace nvdra::ledger {
namespace {

// An entry rebuilt from a CDI spec alone: the first Prepare of the claim
// brings its allocation.
bool IsRebuiltWithoutAllocation(const ClaimEntry& e) {
  return e.allocation.empty() && e.origin == ClaimOrigin::kRebuilt;
}

Transition Write(ClaimEntry e, BeginOutcome outcome = BeginOutcome::kStarted) {
  return Transition{outcome, std::move(e), true};
}

Transition Keep(std::optional<ClaimEntry> e, BeginOutcome outcome = BeginOutcome::kStarted) {
  return Transition{outcome, std::move(e), false};
}

// A live entry of the same claim: repeats, retries, redoes, or refusals.
// nullopt: the request starts the claim afresh (a tombstone of another
// allocation, or one reserved for a consumer).
std::optional<Result<Transition>> ContinueExisting(const ClaimEntry& cur, const BeginPrepareRequest& req,
                                                   const TransitionContext& ctx) {
  bool same = SameAllocation(cur.allocation, req.allocation);
  if (!same && cur.state != ClaimState::kTombstone) {
    return FailedPrecondition(fmt::format("claim {} is already recorded as {} for a different allocation; refusing to "
                                          "overwrite it (unprepare the claim first)",
                                          DescribeClaim(cur),
                                          cur.unknown_state.empty() ? ClaimStateName(cur.state) : cur.unknown_state));
  }
  switch (cur.state) {
    case ClaimState::kPrepareCompleted: {
      if (!FromEarlierBoot(cur, ctx.boot_id)) return Keep(cur, BeginOutcome::kAlreadyPrepared);
      // The redo's CompletePrepare must name this attempt. The entry
      // keeps its old boot id, so a crash before then still redoes.
      ClaimEntry e = cur;
      e.attempt = ctx.new_attempt;
      e.updated = ctx.now;
      return Write(std::move(e), BeginOutcome::kRedoAfterReboot);
    }
    case ClaimState::kPrepareStarted: {
      // A new attempt supersedes the earlier one: it can no longer complete.
      ClaimEntry e = cur;
      e.attempt = ctx.new_attempt;
      e.consumers = SortedUnique(req.consumers);
      e.updated = ctx.now;
      return Write(std::move(e), BeginOutcome::kRetry);
    }
    case ClaimState::kUnprepareStarted:
      return FailedPrecondition(
          fmt::format("claim {} is being unprepared (UnprepareStarted); refusing to prepare it until "
                      "the unprepare finishes",
                      DescribeClaim(cur)));
    case ClaimState::kTombstone:
      if (same && req.consumers.empty()) {
        auto left = std::chrono::duration_cast<std::chrono::seconds>(ctx.tombstone_ttl - (ctx.now - cur.updated));
        return FailedPrecondition(
            fmt::format("claim {} was unprepared recently and is reserved for no pod now; refusing a "
                        "late Prepare of the same allocation, which would resurrect a claim the kubelet "
                        "already released (the refusal expires in {}s)",
                        DescribeClaim(cur), left.count()));
      }
      break;  // a new allocation under the same UID starts afresh
  }
  return std::nullopt;
}

}  // namespace

std::string DescribeClaim(const ClaimEntry& e) {
  if (e.ns.empty() && e.name.empty()) return e.uid;
  // model::ClaimRef::ToString's form, in one allocation: every record names its claim.
  std::string out;
  out.reserve(e.ns.size() + e.name.size() + e.uid.size() + 2);
  out.append(e.ns).append("/").append(e.name).append(":").append(e.uid);
  return out;
}

std::vector<std::string> SortedUnique(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

bool FromEarlierBoot(const ClaimEntry& e, const std::string& boot_id) {
  return e.state != ClaimState::kTombstone && !boot_id.empty() && e.boot_id != boot_id;
}

std::vector<std::string> RequestedHeld(const BeginPrepareRequest& req) {
  std::vector<std::string> held = req.held ? *req.held : DefaultHeld(req.allocation);
  for (const auto& s : req.shares) held.push_back(s.resource);
  return SortedUnique(std::move(held));
}

Status HeldByAnotherClaim(const KindCodec* codec, const std::string& resource, const std::string& holder,
                          const std::vector<std::string>& requested, std::string_view suffix) {
  std::string words = codec != nullptr ? codec->HeldByAnotherClaim(resource, holder, requested)
                                       : DefaultHeldByAnotherClaim(resource, holder);
  return Conflict(words.append(suffix));
}

namespace {

// `held` with the resources that are requested devices first, each part in
// its given order.
std::vector<std::string> RequestedFirst(const std::vector<std::string>& held,
                                        const std::vector<std::string>& requested) {
  std::vector<std::string> out;
  out.reserve(held.size());
  auto is_requested = [&](const std::string& r) {
    return std::find(requested.begin(), requested.end(), r) != requested.end();
  };
  for (const auto& r : held) {
    if (is_requested(r)) out.push_back(r);
  }
  for (const auto& r : held) {
    if (!is_requested(r)) out.push_back(r);
  }
  return out;
}

}  // namespace

Status CheckNotHeldByOthers(const std::vector<std::string>& held, const std::vector<std::string>& requested,
                            const std::string& uid, const TransitionContext& ctx, std::string_view suffix) {
  if (!ctx.other_holder) return Status::Ok();
  for (const auto& r : RequestedFirst(held, requested)) {
    if (auto holder = ctx.other_holder(r, uid)) return HeldByAnotherClaim(ctx.codec, r, *holder, requested, suffix);
  }
  return Status::Ok();
}

namespace {

std::string Amounts(const std::map<std::string, int64_t>& m, const std::string& name) {
  auto it = m.find(name);
  return std::to_string(it == m.end() ? 0 : it->second);
}

// The capacity `shares` (this claim's on one device) and `others` (the
// other holders' shares of it) consume together, against what the
// device publishes.
Status CheckShareCapacity(const std::string& resource, const std::vector<const HeldShare*>& own,
                          const std::vector<std::pair<const ClaimEntry*, const HeldShare*>>& others,
                          const std::string& uid) {
  std::map<std::string, int64_t> asked, used;
  // Saturating sums; a negative amount (a record no plan of ours wrote)
  // counts as nothing rather than making room.
  auto add = [](std::map<std::string, int64_t>& to, const std::map<std::string, int64_t>& what) {
    for (const auto& [k, v] : what) {
      int64_t& t = to[k];
      if (v <= 0) continue;
      t = t > std::numeric_limits<int64_t>::max() - v ? std::numeric_limits<int64_t>::max() : t + v;
    }
  };
  for (const HeldShare* s : own) {
    for (const auto& [name, amount] : s->consumed) {
      if (amount < 0) {
        return InvalidArgument(fmt::format("requested device {}: claim {} consumes {} {}, a negative amount", resource,
                                           uid, name, amount));
      }
    }
    add(asked, s->consumed);
  }
  std::vector<std::string> holders;
  for (const auto& [e, s] : others) {
    add(used, s->consumed);
    holders.push_back(e->uid);
  }
  holders = SortedUnique(std::move(holders));
  const auto& capacity = own.front()->capacity;
  for (const auto& [name, amount] : asked) {
    auto cap = capacity.find(name);
    if (cap == capacity.end()) {
      return Conflict(fmt::format("requested device {} does not publish the capacity \"{}\" claim {} consumes",
                                  resource, name, uid));
    }
    const int64_t before = used[name];
    // Both are sums of amounts of zero or more, saturated: no wrap.
    if (amount <= cap->second && before <= cap->second - amount) continue;
    if (holders.empty()) {
      return Conflict(fmt::format("requested device {} has no room for claim {}: it publishes {} {} and this claim "
                                  "consumes {}",
                                  resource, uid, name, cap->second, amount));
    }
    return Conflict(
        fmt::format("requested device {} has no room for claim {}: it publishes {} {}, claims {} already consume {} "
                    "(according to checkpoint) and this claim consumes {}",
                    resource, uid, name, cap->second, fmt::join(holders, ", "), Amounts(used, name), amount));
  }
  return Status::Ok();
}

}  // namespace

Status CheckHeldAgainstOthers(const std::vector<std::string>& held, const std::vector<std::string>& requested,
                              const std::vector<HeldShare>& shares, const std::string& uid,
                              const TransitionContext& ctx) {
  if (!ctx.other_holders) return CheckNotHeldByOthers(held, requested, uid, ctx);
  ClaimEntry self;
  self.shares = shares;
  for (const auto& r : RequestedFirst(held, requested)) {
    std::vector<const ClaimEntry*> others = ctx.other_holders(r, uid);
    std::vector<const HeldShare*> own = SharesOf(self, r);
    if (own.empty()) {
      if (others.empty()) continue;
      return HeldByAnotherClaim(ctx.codec, r, others.front()->uid, requested);
    }
    std::vector<std::pair<const ClaimEntry*, const HeldShare*>> theirs;
    for (const ClaimEntry* o : others) {
      std::vector<const HeldShare*> os = SharesOf(*o, r);
      if (os.empty()) return HeldByAnotherClaim(ctx.codec, r, o->uid, requested);
      for (const HeldShare* s : os) {
        // A share imported from the Go driver's checkpoint has no known
        // sharing configuration (KindCodec::ImportHeldCapacity): only its capacity
        // counts.
        if (!s->sharing.empty() && s->sharing != own.front()->sharing) {
          return Conflict(fmt::format(
              "requested device {} has conflicting configuration with already prepared claim {}", r, o->uid));
        }
        theirs.emplace_back(o, s);
      }
    }
    NVDRA_RETURN_IF_ERROR(CheckShareCapacity(r, own, theirs, uid));
  }
  return Status::Ok();
}

namespace transition {

Transition AdoptName(const ClaimEntry* cur, const std::string& ns, const std::string& name,
                     const TransitionContext& ctx) {
  if (cur == nullptr || !HoldsResources(cur->state) || !cur->name.empty() || name.empty()) return Keep(std::nullopt);
  ClaimEntry e = *cur;
  e.ns = ns;
  e.name = name;
  e.updated = ctx.now;
  return Write(std::move(e));
}

Result<Transition> BeginPrepare(const ClaimEntry* cur, const BeginPrepareRequest& req, const TransitionContext& ctx) {
  bool adopt = cur != nullptr && HoldsResources(cur->state) && IsRebuiltWithoutAllocation(*cur) &&
               !req.allocation.empty();
  if (cur != nullptr && !adopt) {
    if (auto decided = ContinueExisting(*cur, req, ctx)) return std::move(*decided);
  }
  std::vector<std::string> held = RequestedHeld(req);
  NVDRA_RETURN_IF_ERROR(CheckHeldAgainstOthers(held, DefaultHeld(req.allocation), req.shares, req.uid, ctx));
  ClaimEntry e;
  e.uid = req.uid;
  e.ns = req.ns;
  e.name = req.name;
  e.state = ClaimState::kPrepareStarted;
  e.allocation = req.allocation;
  e.held = std::move(held);
  e.shares = req.shares;
  e.consumers = SortedUnique(req.consumers);
  e.undo = req.undo;
  e.attempt = ctx.new_attempt;
  e.boot_id = ctx.boot_id;
  e.updated = ctx.now;
  if (cur != nullptr) e.extra = cur->extra;
  if (adopt) {
    // Rebuilt from a CDI spec: the devices may be set up; redo them from
    // the allocation the kubelet brings, with what was recorded as undo.
    if (e.ns.empty()) e.ns = cur->ns;
    if (e.name.empty()) e.name = cur->name;
    if (e.undo.is_null()) {
      e.undo = cur->undo;
      e.origin = cur->origin;
    }
  }
  return Write(std::move(e), adopt ? BeginOutcome::kRetry : BeginOutcome::kStarted);
}

Result<Transition> CompletePrepare(const ClaimEntry* cur, const std::string& uid, std::vector<PreparedDevice> prepared,
                                   nlohmann::json undo, const std::optional<std::string>& attempt,
                                   const TransitionContext& ctx) {
  if (cur == nullptr || cur->state == ClaimState::kTombstone || cur->state == ClaimState::kUnprepareStarted) {
    return FailedPrecondition(
        fmt::format("cannot complete prepare of claim {}: it is {} (was it unprepared meanwhile?)", uid,
                    cur == nullptr ? "not in the ledger" : ClaimStateName(cur->state)));
  }
  if (attempt && *attempt != cur->attempt) {
    return FailedPrecondition(
        fmt::format("cannot complete prepare of claim {}: the attempt that began it was superseded (by "
                    "another prepare or an unprepare meanwhile); the kubelet will retry",
                    DescribeClaim(*cur)));
  }
  if (cur->state == ClaimState::kPrepareCompleted) {
    if (cur->prepared != prepared) {
      return FailedPrecondition(
          fmt::format("claim {} was prepared with different devices before; a repeated prepare must "
                      "return the recorded devices",
                      DescribeClaim(*cur)));
    }
    if (ctx.boot_id.empty() || cur->boot_id == ctx.boot_id) return Keep(*cur);  // idempotent
  }
  ClaimEntry e = *cur;
  e.state = ClaimState::kPrepareCompleted;
  e.unknown_state.clear();
  e.prepared = std::move(prepared);
  if (!undo.is_null()) {
    e.undo = std::move(undo);
    e.origin = ClaimOrigin::kPrepare;
  }
  e.boot_id = ctx.boot_id;
  e.updated = ctx.now;
  return Write(std::move(e));
}

Result<Transition> BeginUnprepare(const ClaimEntry* cur, const TransitionContext& ctx) {
  if (cur == nullptr || cur->state == ClaimState::kTombstone) return Keep(std::nullopt);
  if (cur->state == ClaimState::kUnprepareStarted) return Keep(*cur);
  ClaimEntry e = *cur;
  e.state = ClaimState::kUnprepareStarted;
  e.unknown_state.clear();
  e.updated = ctx.now;
  return Write(std::move(e));
}

Result<Transition> FinishUnprepare(const ClaimEntry* cur, const TransitionContext& ctx) {
  if (cur == nullptr || cur->state == ClaimState::kTombstone) return Keep(std::nullopt);
  if (cur->state != ClaimState::kUnprepareStarted) {
    return FailedPrecondition(fmt::format("cannot finish unprepare of claim {}: it is {}, not UnprepareStarted",
                                          DescribeClaim(*cur), ClaimStateName(cur->state)));
  }
  // A tombstone keeps what a late Prepare is compared with, nothing it held.
  ClaimEntry e;
  e.uid = cur->uid;
  e.ns = cur->ns;
  e.name = cur->name;
  e.state = ClaimState::kTombstone;
  e.allocation = cur->allocation;
  e.consumers = cur->consumers;
  e.extra = cur->extra;
  e.updated = ctx.now;
  return Write(std::move(e));
}

}  // namespace transition
}  // namespace nvdra::ledger
