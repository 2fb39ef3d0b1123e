// The claim state machine of the ledger, as pure functions: the claim's
// current entry (if any), what other live claims hold, and a request in;
// the next entry (or nothing to write) or an error out. No I/O, no locks,
// no clock reads: ClaimLedger fills a TransitionContext under its locks,
// appends what a transition returns and makes it durable.
//
//   (none) --BeginPrepare--> PrepareStarted --CompletePrepare--> PrepareCompleted
//   live   --BeginUnprepare--> UnprepareStarted --FinishUnprepare--> Tombstone
//   Tombstone: refuses a late Prepare of the same allocation for a claim
//   reserved for nobody, until it expires (tombstone_ttl).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ledger/claim_entry.h"
#include "ledger/kind_codec.h"
#include "util/status.h"

namespace nvdra::ledger {

enum class BeginOutcome {
  kStarted,  // fresh: PrepareStarted recorded, do the device work
  kRetry,    // was PrepareStarted: redo (a new attempt is recorded); entry.undo says what an earlier attempt recorded
  kAlreadyPrepared,  // completed in this boot: return entry.prepared, nothing written
  kRedoAfterReboot,  // completed in an earlier boot: redo node work (a new attempt is recorded), return entry.prepared
};

struct BeginPrepareRequest {
  std::string uid, ns, name;
  std::vector<AllocatedDevice> allocation;
  // Exclusive resources; default: names of the non-admin allocated devices.
  std::optional<std::vector<std::string>> held;
  nlohmann::json undo;
  // The claim's status.reservedFor consumer UIDs as the API server has them
  // now. The kubelet prepares a claim only for a pod in reservedFor, so while
  // any consumer is listed a Prepare is legitimate, even right after an
  // unprepare (pod A ended, pod B starts). A tombstone refuses only a Prepare
  // of the same allocation for a claim reserved for nobody: a late retry.
  std::vector<std::string> consumers;
  // The held resources the claim takes as a share of a device that others
  // may share too (consumable shares); each is held as well.
  std::vector<HeldShare> shares;
};

// What a transition sees besides the claim's own entry.
struct TransitionContext {
  std::string boot_id;  // the current boot; "": every entry counts as this boot's
  std::chrono::system_clock::time_point now;
  std::chrono::nanoseconds tombstone_ttl{0};
  // The attempt a BeginPrepare records when it writes (fresh per call).
  std::string new_attempt;
  // The uid of a live claim other than `except` holding `resource`, if any
  // (the first in record order). Unset: nobody else holds anything.
  std::function<std::optional<std::string>(const std::string& resource, const std::string& except)> other_holder;
  // Every live claim other than `except` holding `resource`, in record
  // order, for the rule of shared devices. Unset: other_holder decides
  // alone, as if nobody held a share.
  std::function<std::vector<const ClaimEntry*>(const std::string& resource, const std::string& except)> other_holders;
  // The device kind's codec, which words a refusal (KindCodec::
  // HeldByAnotherClaim); nullptr: the ledger's own sentence.
  const KindCodec* codec = nullptr;
};

// What a transition decided.
struct Transition {
  BeginOutcome outcome = BeginOutcome::kStarted;  // BeginPrepare only
  // The claim's entry after the transition; nullopt: it has none (an
  // unknown or released claim).
  std::optional<ClaimEntry> entry;
  bool write = false;  // `entry` is a new record to append
};

// "<ns>/<name>:<uid>", or the uid alone for an entry without a name.
std::string DescribeClaim(const ClaimEntry& e);
std::vector<std::string> SortedUnique(std::vector<std::string> v);
// Whether `e` was prepared in an earlier boot than `boot_id` (tombstones never).
bool FromEarlierBoot(const ClaimEntry& e, const std::string& boot_id);
// The resources a BeginPrepare records: req.held, else the non-admin
// allocated devices, and the devices of req.shares; sorted, unique.
std::vector<std::string> RequestedHeld(const BeginPrepareRequest& req);

// Conflict with the words `codec` gives for `resource`, which `requested`
// (the refused claim's non-admin devices) asked for and claim `holder`
// holds, followed by `suffix`; without a codec, "<resource> already
// allocated by claim <holder> (according to checkpoint)<suffix>".
Status HeldByAnotherClaim(const KindCodec* codec, const std::string& resource, const std::string& holder,
                          const std::vector<std::string>& requested, std::string_view suffix = "");

// The one conflict scan: a HeldByAnotherClaim Conflict for the first
// resource of `held` another live claim than `uid` holds, the devices of
// `requested` scanned first (a device held twice is named as such rather
// than by a resource it shares); Ok when none is held.
Status CheckNotHeldByOthers(const std::vector<std::string>& held, const std::vector<std::string>& requested,
                            const std::string& uid, const TransitionContext& ctx, std::string_view suffix = {});

// The conflict rule of BeginPrepare. A resource `uid` holds exclusively
// (not in `shares`) conflicts with any other live holder, as in
// CheckNotHeldByOthers (`requested` as there). A resource it takes as a share is admitted only
// when every other holder holds a share of it too (else the same "already
// allocated" conflict), with the same sharing configuration (else Conflict
// "requested device <d> has conflicting configuration with already prepared
// claim <uid>", upstream's words), and when the capacity all of them
// consume, this claim's included, fits what the device publishes per the
// share's `capacity` (else Conflict naming the device, the capacity, what
// the holders consume and who they are). The capacity is checked for a
// share no other claim holds too, with sums that saturate instead of
// wrapping; a negative amount is InvalidArgument. Runs inside the transition, under
// the ledger's locks, so the check and the record are one step.
Status CheckHeldAgainstOthers(const std::vector<std::string>& held, const std::vector<std::string>& requested,
                              const std::vector<HeldShare>& shares, const std::string& uid,
                              const TransitionContext& ctx);

// The transitions, one per ClaimLedger operation (named alike; called as
// transition::BeginPrepare(...)).
namespace transition {

// Records the namespace and name of a live entry that has none (imported,
// or rebuilt); writes nothing when it has one or `name` is empty.
Transition AdoptName(const ClaimEntry* cur, const std::string& ns, const std::string& name,
                     const TransitionContext& ctx);

// `cur`: the claim's live entry (expired tombstones hidden), nullptr if none.
// Errors: Conflict (see CheckHeldAgainstOthers); FailedPrecondition for a
// different allocation under the same UID, an unprepare in progress, or a
// tombstoned claim reserved for nobody.
Result<Transition> BeginPrepare(const ClaimEntry* cur, const BeginPrepareRequest& req, const TransitionContext& ctx);

// `attempt`: the BeginPrepare's attempt; nullopt skips that check. Writes
// nothing for a repeat of a completion in this boot.
Result<Transition> CompletePrepare(const ClaimEntry* cur, const std::string& uid, std::vector<PreparedDevice> prepared,
                                   nlohmann::json undo, const std::optional<std::string>& attempt,
                                   const TransitionContext& ctx);

// No entry for an unknown or released claim; UnprepareStarted otherwise
// (written unless it already was).
Result<Transition> BeginUnprepare(const ClaimEntry* cur, const TransitionContext& ctx);

// A tombstone replaces an UnprepareStarted entry; nothing for an unknown or
// released claim; FailedPrecondition in any other state.
Result<Transition> FinishUnprepare(const ClaimEntry* cur, const TransitionContext& ctx);

}  // namespace transition

}  // namespace nvdra::ledger
