// The in-memory view rebuilt from the log: the latest entry per claim, who
// holds which resource, and the byte accounting that decides compaction.
// It applies verified records only and never touches a file, so both the
// ledger and the read-only inspector (nvdractl ledger verify) use it.
#pragma once

#include <array>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ledger/claim_entry.h"
#include "ledger/log_format.h"

namespace nvdra::ledger {

class LedgerState {
 public:
  // Applies one verified record. A record this version cannot interpret (an
  // unknown type, or an entry it cannot parse) is kept verbatim so that a
  // compaction writes it back; the returned message says why.
  std::optional<std::string> Apply(const DecodedRecord& r);

  // Makes `e` the claim's current entry; `record_size` is its frame size,
  // `text` its record's payload when the caller wrote it (kept so that the
  // claim's next record reuses its unchanged parts; see EntryJsonParts).
  void Put(ClaimEntry e, uint64_t record_size, EntryText text = {});
  void Erase(const std::string& uid);

  const ClaimEntry* Find(const std::string& uid) const;
  // The payload of the claim's current record as Put was given it, or
  // nullptr (none given: applied from the file).
  const EntryText* TextOf(const std::string& uid) const;
  // The live claim holding `resource`, if any (the earliest recorded one when
  // a damaged log names several).
  const ClaimEntry* HolderOf(const std::string& resource) const;
  // Every live claim holding `resource` other than `except`, in record order.
  std::vector<const ClaimEntry*> HoldersOf(const std::string& resource, const std::string& except = "") const;

  // Drops tombstones older than `ttl`; returns how many. Amortized O(1) per
  // tombstone (they expire in the order they were written); `full_scan` also
  // catches any written out of order (a clock step).
  size_t DropExpiredTombstones(std::chrono::system_clock::time_point now, std::chrono::nanoseconds ttl,
                               bool full_scan = true);

  const std::map<std::string, ClaimEntry>& entries() const { return entries_; }
  // Entries per state (tombstones the TTL has expired but that are not yet
  // dropped included), kept as records are applied: O(1) per record.
  int64_t count(ClaimState s) const { return state_counts_[static_cast<size_t>(s)]; }
  // Devices returned by PrepareCompleted entries, counted by what the
  // classifier makes of a device name (its type: a handful of keys however
  // many entries the ledger holds), or by device name without one. Keys
  // whose count drops to 0 are removed.
  const std::unordered_map<std::string, int64_t>& prepared_devices() const { return prepared_devices_; }
  using DeviceClassifier = std::function<std::string(const std::string& device)>;
  // Sets the classifier and recounts the prepared devices (O(entries), once).
  void set_device_classifier(DeviceClassifier classify);
  // Frames kept verbatim (unknown types, unreadable entries), in file order.
  const std::vector<std::string>& kept_frames() const { return kept_frames_; }
  uint64_t live_bytes() const { return live_bytes_; }
  uint64_t generation() const { return generation_; }
  void set_generation(uint64_t g) { generation_ = g; }
  // Resources claimed by two live entries at once (only damage or a bug can
  // do that), as "<resource> (claims <uid>, <uid>)", found while applying.
  // Claims that each hold a share of a device (HeldShare) are not that.
  size_t double_held() const { return double_holds_.size(); }
  const std::vector<std::string>& double_holds() const { return double_holds_; }

  // Meta-record facts that outlive a rewrite (see docs/ledger-format.md):
  // since when a ledger.log that could not be read was set aside (its claims
  // may be missing here), and which Go checkpoint was imported.
  struct Meta {
    int64_t lost_claims_since_ms = 0;
    std::string lost_claims_file;
    std::string imported_checkpoint;  // checksum text of the imported checkpoint.json
  };
  const Meta& meta() const { return meta_; }
  Meta& mutable_meta() { return meta_; }

 private:
  void Count(const ClaimEntry& e, int64_t delta);
  static std::vector<std::string> UniqueHeld(const ClaimEntry& e);
  // Whether `next` holds exactly what `cur` holds, and `cur` alone holds
  // each of it: then replacing one by the other leaves the holders as they are.
  bool SameSoleHolding(const ClaimEntry& cur, const ClaimEntry& next) const;
  struct Record {
    uint64_t size = 0;  // frame size
    EntryText text;
  };

  std::map<std::string, ClaimEntry> entries_;
  std::array<int64_t, kClaimStateCount> state_counts_{};
  std::unordered_map<std::string, int64_t> prepared_devices_;
  DeviceClassifier classify_;
  std::unordered_map<std::string, Record> records_;  // uid -> its current record
  // resource -> live holders in record order (more than one only after damage)
  std::unordered_map<std::string, std::vector<std::string>> holders_;
  // resource -> how many of its live holders hold it whole, not as a share
  // (kept as holders come and go, so a Put costs the same whatever the
  // number of holders).
  std::unordered_map<std::string, int64_t> whole_holders_;
  std::vector<std::string> kept_frames_;
  std::deque<std::pair<std::chrono::system_clock::time_point, std::string>> tombstones_;
  uint64_t kept_bytes_ = 0;
  uint64_t live_bytes_ = 0;
  uint64_t generation_ = 0;
  std::vector<std::string> double_holds_;
  Meta meta_;

 public:
  uint64_t kept_bytes() const { return kept_bytes_; }
};

}  // namespace nvdra::ledger
