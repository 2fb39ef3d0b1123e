// What to do about one ledger entry, decided from what the API server says
// about its ResourceClaim now. Pure functions (no I/O, time passed in), so
// the rules are pinned by table tests; the reconciler asks and the engine
// carries the answer out. JudgeClaim is the one place that says whether a
// claim an entry was prepared for is still the claim the API server has; the
// engine's check of a conflicting holder uses it too.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "driver/claim_source.h"
#include "ledger/claim_entry.h"
#include "util/status.h"

namespace nvdra::driver {

enum class ClaimStanding {
  kCurrent,  // same UID, allocated as recorded, on this node
  kGone,     // no claim of that name, or one with another UID
  kStale,    // exists, but deallocated, reallocated differently, or allocated to another node
  kUnknown,  // the API server could not be asked (transport or server error)
  kUnnamed,  // the entry records no claim name (imported), so it cannot be looked up
};

struct Judgement {
  ClaimStanding standing = ClaimStanding::kUnknown;
  std::string why;  // for logs: "its ResourceClaim no longer exists", ...
};

// `current` is the API server's answer for the entry's namespace and name
// (NotFound when there is none). `node`: this node's name, which is also the
// pool name of its devices; "" skips the node check.
Judgement JudgeClaim(const ledger::ClaimEntry& entry, const Result<ClaimSnapshot>& current, const std::string& node);

enum class Action {
  kKeep,         // the claim is current (or the entry holds nothing): nothing to do
  kCannotCheck,  // no claim name: leave it, warn
  kRetryLater,   // the API server could not be asked: leave it for the next pass
  kWaitGrace,    // a prepared claim (of this boot) is gone or stale, but the kubelet may still unprepare it
  kUnprepare,    // unprepare it now
};

const char* ActionName(Action a);

struct DecideInput {
  std::string node;  // see JudgeClaim
  std::chrono::system_clock::time_point now;
  // Since when a prepared claim has been seen gone or stale (nullopt: not
  // seen so far); prepared claims are unprepared only `grace` after that.
  std::optional<std::chrono::system_clock::time_point> gone_since;
  std::chrono::milliseconds grace{0};
};

struct Decision {
  Action action = Action::kKeep;
  Judgement judgement;
  // kWaitGrace: the grace period starts with this pass (first sighting).
  bool grace_started = false;
};

Decision Decide(const ledger::ClaimEntry& entry, const Result<ClaimSnapshot>& current, const DecideInput& in);

}  // namespace nvdra::driver
