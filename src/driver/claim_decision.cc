#include "driver/claim_decision.h"

namespace nvdra::driver {

namespace {

// The entry's driver: every result it recorded is of one driver.
std::string DriverOf(const ledger::ClaimEntry& entry) {
  return entry.allocation.empty() ? "" : entry.allocation.front().driver;
}

}  // namespace

Judgement JudgeClaim(const ledger::ClaimEntry& entry, const Result<ClaimSnapshot>& current, const std::string& node) {
  if (entry.name.empty()) return {ClaimStanding::kUnnamed, "the ledger records no claim name"};
  if (!current.ok()) {
    if (current.status().code() == StatusCode::kNotFound) {
      return {ClaimStanding::kGone, "its ResourceClaim no longer exists"};
    }
    return {ClaimStanding::kUnknown, current.status().message()};
  }
  if (current->uid != entry.uid) {
    return {ClaimStanding::kGone, "its ResourceClaim was replaced (the API server has UID " + current->uid + ")"};
  }
  if (!current->allocated) return {ClaimStanding::kStale, "its ResourceClaim is no longer allocated"};
  // Entries imported from the Go driver's checkpoint may not know their
  // allocation: nothing to compare then.
  const std::string driver = DriverOf(entry);
  if (driver.empty()) return {ClaimStanding::kCurrent, ""};
  std::vector<model::AllocationResult> ours;
  for (const auto& r : current->results) {
    if (r.driver != driver) continue;
    if (!node.empty() && r.pool != node) {
      return {ClaimStanding::kStale, "its ResourceClaim is allocated to another node (pool " + r.pool + ")"};
    }
    ours.push_back(r);
  }
  if (!ledger::SameAllocation(entry.allocation, ours)) {
    return {ClaimStanding::kStale, "its ResourceClaim was allocated again, with other devices"};
  }
  return {ClaimStanding::kCurrent, ""};
}

const char* ActionName(Action a) {
  switch (a) {
    case Action::kKeep: return "keep";
    case Action::kCannotCheck: return "cannot-check";
    case Action::kRetryLater: return "retry-later";
    case Action::kWaitGrace: return "wait-grace";
    case Action::kUnprepare: return "unprepare";
  }
  return "unknown";
}

Decision Decide(const ledger::ClaimEntry& entry, const Result<ClaimSnapshot>& current, const DecideInput& in) {
  Decision d;
  if (!ledger::HoldsResources(entry.state)) return d;
  d.judgement = JudgeClaim(entry, current, in.node);
  switch (d.judgement.standing) {
    case ClaimStanding::kCurrent: d.action = Action::kKeep; return d;
    case ClaimStanding::kUnknown: d.action = Action::kRetryLater; return d;
    case ClaimStanding::kUnnamed: {
      // Nothing can ever tell whether its claim still exists (rebuilt from
      // a spec that does not name it, imported from an old checkpoint): a
      // Prepare of it would record its name, so once the grace period has
      // passed without one it is released rather than held forever.
      d.grace_started = !in.gone_since.has_value();
      auto since = in.gone_since.value_or(in.now);
      d.action = in.now - since < in.grace ? Action::kCannotCheck : Action::kUnprepare;
      if (d.action == Action::kUnprepare) {
        d.judgement.why = "the ledger records no claim name and no Prepare brought one";
      }
      return d;
    }
    case ClaimStanding::kGone:
    case ClaimStanding::kStale: break;
  }
  // Half-done entries (PrepareStarted, UnprepareStarted) have no kubelet
  // call coming that would finish them: roll them back now.
  if (entry.state != ledger::ClaimState::kPrepareCompleted) {
    d.action = Action::kUnprepare;
    return d;
  }
  // Prepared before the node rebooted: what it set up is gone with the boot,
  // no kubelet call will release it, and its devices may already be
  // allocated to another claim. Release it now.
  if (entry.from_earlier_boot) {
    d.action = Action::kUnprepare;
    d.judgement.why += " (prepared before the node rebooted)";
    return d;
  }
  // A prepared claim is normally released by the kubelet; only one it
  // forgot (a force-deleted pod) is unprepared, after the grace period.
  d.grace_started = !in.gone_since.has_value();
  auto since = in.gone_since.value_or(in.now);
  d.action = in.now - since < in.grace ? Action::kWaitGrace : Action::kUnprepare;
  return d;
}

}  // namespace nvdra::driver
