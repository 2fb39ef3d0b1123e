// What the ledger records per claim UID, and its JSON form on disk. Keys this
// version does not know (written by a newer one) are kept in `extra` and
// written back, so a downgrade followed by a rewrite loses nothing.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/claim.h"
#include "util/status.h"

namespace nvdra::ledger {

// One allocation result of the claim for this driver.
using AllocatedDevice = model::AllocationResult;

// One device as returned to the kubelet.
using PreparedDevice = model::PreparedDevice;

enum class ClaimState { kPrepareStarted, kPrepareCompleted, kUnprepareStarted, kTombstone };
inline constexpr size_t kClaimStateCount = 4;

const char* ClaimStateName(ClaimState s);
std::optional<ClaimState> ParseClaimState(std::string_view s);

// Live states hold their resources; a tombstone holds nothing.
inline bool HoldsResources(ClaimState s) { return s != ClaimState::kTombstone; }

// Where a live entry's undo record came from. Persisted as the entry's
// "origin" (omitted for kPrepare). Entries written before the key existed
// carry the marker inside their undo record instead ({"rebuilt": ...},
// {"legacyCheckpoint": ...}); they decode to the same origin.
enum class ClaimOrigin {
  kPrepare,           // the kind's own record, from a Prepare of this plugin
  kRebuilt,           // rebuilt from the claim's CDI spec after the ledger was lost
  kLegacyCheckpoint,  // imported from the Go driver's checkpoint.json
};
// "rebuilt", "legacyCheckpoint"; "" for kPrepare.
const char* ClaimOriginName(ClaimOrigin o);

// One share of a device that allows multiple allocations (consumable
// shares): the device is in the claim's `held` too, and other live claims
// may hold it at the same time, each with a share of its own, while their
// sharing configurations are equal and the capacity they consume together
// fits what the device publishes (see CheckHeldAgainstOthers). Recorded in
// the entry so the rule holds across both plugin processes and restarts.
struct HeldShare {
  std::string resource;  // the device, e.g. "gpu-0"
  std::string share_id;  // the allocation result's shareID
  // consumedCapacity of the allocation result, in base units (bytes,
  // shares): capacity name -> amount.
  std::map<std::string, int64_t> consumed;
  // What the device published when the claim was prepared, for messages and
  // inspection; a new share is checked against what it publishes now.
  std::map<std::string, int64_t> capacity;
  // The sharing configuration that applies to the device (canonical JSON of
  // the normalized opaque config); every holder of the device has the same.
  std::string sharing;
  // Keys of a newer writer, written back untouched.
  nlohmann::json extra = nlohmann::json::object();
  friend bool operator==(const HeldShare&, const HeldShare&) = default;
};

struct ClaimEntry {
  std::string uid, ns, name;
  ClaimState state = ClaimState::kPrepareStarted;
  std::vector<AllocatedDevice> allocation;
  // Exclusive resources (e.g. "gpu-0", "channel-3"); no two live claims share one.
  std::vector<std::string> held;
  // The resources of `held` this claim holds as a share of a device that
  // others may share (empty for entries that hold everything exclusively,
  // and for entries written before shares existed).
  std::vector<HeldShare> shares;
  std::vector<PreparedDevice> prepared;
  // UIDs of the consumers (pods) the claim was reserved for when it was last
  // prepared (for inspection; kept in the tombstone).
  std::vector<std::string> consumers;
  // Names the BeginPrepare that started the current prepare (or the redo
  // after a reboot): CompletePrepare must present it, so an attempt that
  // was superseded (unprepared, or begun again) can never complete.
  std::string attempt;
  // Opaque record of the device kind: enough to undo without the API server.
  nlohmann::json undo;
  // Where `undo` came from: a transition that replaces the record resets it.
  ClaimOrigin origin = ClaimOrigin::kPrepare;
  // Boot in which the node-side work was last done.
  std::string boot_id;
  std::chrono::system_clock::time_point updated;
  // Unknown top-level keys from a newer writer, written back untouched.
  nlohmann::json extra = nlohmann::json::object();
  // The state as a newer writer recorded it, when this version does not know
  // it. Such an entry still supersedes older entries of its claim; in memory
  // it acts as PrepareStarted (it holds its resources, a Prepare redoes the
  // node work, an Unprepare undoes it), and it is written back with this
  // state until a transition of this version replaces it.
  std::string unknown_state;

  // Not stored: set by the ledger when boot_id differs from the current boot.
  bool from_earlier_boot = false;
};

nlohmann::json EntryToJson(const ClaimEntry& e);
// EntryToJson(e).dump(), the bytes a record holds, written straight from the
// entry when it has nothing beyond what this version knows of every claim
// (no extra keys, shares or consumed capacity): building the document cost
// each transition more than its fdatasync's CPU. Otherwise the document's
// dump. Invalid UTF-8 throws as the dump does.
std::string EntryJsonText(const ClaimEntry& e);

// A record's text with where each of its members starts, so that the next
// record of the same claim copies the members that did not change instead
// of writing them again (a transition changes two or three of thirteen).
inline constexpr size_t kEntryTextParts = 13;
struct EntryText {
  std::string json;
  // at[k]: where the k-th member in key order starts (with its comma; the
  // first with the opening brace), at[kEntryTextParts]: the end. Filled when
  // `parts`; an entry written through the document has none.
  std::array<uint32_t, kEntryTextParts + 1> at{};
  bool parts = false;
};
// EntryJsonText(e), with the parts of `before_text` (the text of `before`,
// the claim's previous entry) reused where e's member equals before's.
// Either may be null: then every member is written.
EntryText EntryJsonParts(const ClaimEntry& e, const ClaimEntry* before = nullptr,
                         const EntryText* before_text = nullptr);
// Lenient where it can be (missing optional keys), strict on the uid. A state
// this version does not know is kept in unknown_state (see there).
Result<ClaimEntry> EntryFromJson(const nlohmann::json& j);

// Parses a persisted entry (a ledger record's payload) with its nesting depth
// bounded, so a crafted record cannot exhaust the stack. Discarded on error.
nlohmann::json ParsePersistedJson(std::string_view text);
inline constexpr size_t kMaxPersistedJsonDepth = 64;

// Allocations compare as sets: the order of results carries no meaning.
bool SameAllocation(std::vector<AllocatedDevice> a, std::vector<AllocatedDevice> b);

// The shares `e` holds of `resource` (none: it holds it exclusively, or not).
std::vector<const HeldShare*> SharesOf(const ClaimEntry& e, const std::string& resource);

// Default held resources: the non-admin allocated devices, sorted, unique.
std::vector<std::string> DefaultHeld(const std::vector<AllocatedDevice>& allocation);

}  // namespace nvdra::ledger
