#include "ledger/ledger_state.h"

#include <algorithm>

namespace nvdra::ledger {

std::optional<std::string> LedgerState::Apply(const DecodedRecord& r) {
  auto keep = [&](std::string why) {
    std::string frame = EncodeRecord(r.type, r.payload);
    kept_bytes_ += frame.size();
    kept_frames_.push_back(std::move(frame));
    return std::optional<std::string>(std::move(why));
  };
  if (r.type != static_cast<uint8_t>(RecordType::kMeta) && r.type != static_cast<uint8_t>(RecordType::kEntry)) {
    return keep("record at offset " + std::to_string(r.offset) + " has unknown type " + std::to_string(r.type) +
                " (written by a newer version?); kept as is");
  }
  nlohmann::json j = ParsePersistedJson(r.payload);
  if (j.is_discarded() || !j.is_object()) {
    return keep("record at offset " + std::to_string(r.offset) + " is not a JSON object (or nests deeper than " +
                std::to_string(kMaxPersistedJsonDepth) + " levels); kept as is");
  }
  if (r.type == static_cast<uint8_t>(RecordType::kMeta)) {
    if (auto it = j.find("generation"); it != j.end() && it->is_number_unsigned()) {
      generation_ = it->get<uint64_t>();
    }
    meta_ = Meta();
    if (auto it = j.find("lostClaimsSinceUnixMs"); it != j.end() && it->is_number_integer()) {
      meta_.lost_claims_since_ms = it->get<int64_t>();
    }
    if (auto it = j.find("lostClaimsFile"); it != j.end() && it->is_string()) {
      meta_.lost_claims_file = it->get<std::string>();
    }
    if (auto it = j.find("importedCheckpoint"); it != j.end() && it->is_string()) {
      meta_.imported_checkpoint = it->get<std::string>();
    }
    return std::nullopt;
  }
  auto e = EntryFromJson(j);
  if (!e.ok()) {
    return keep("record at offset " + std::to_string(r.offset) + ": " + e.status().message() + "; kept as is");
  }
  std::optional<std::string> note;
  if (!e->unknown_state.empty()) {
    note = "claim " + e->uid + " is recorded in state \"" + e->unknown_state +
           "\", which this version does not know (written by a newer version?); it replaces the "
           "claim's earlier entries and is treated as PrepareStarted";
  }
  Put(std::move(e).value(), r.size);
  return note;
}

void LedgerState::Count(const ClaimEntry& e, int64_t delta) {
  state_counts_[static_cast<size_t>(e.state)] += delta;
  if (e.state != ClaimState::kPrepareCompleted) return;
  for (const auto& d : e.prepared) {
    auto it = prepared_devices_.try_emplace(classify_ ? classify_(d.device) : d.device, 0).first;
    it->second += delta;
    if (it->second == 0) prepared_devices_.erase(it);
  }
}

void LedgerState::set_device_classifier(DeviceClassifier classify) {
  classify_ = std::move(classify);
  prepared_devices_.clear();
  for (const auto& [uid, e] : entries_) {
    if (e.state != ClaimState::kPrepareCompleted) continue;
    for (const auto& d : e.prepared) ++prepared_devices_[classify_ ? classify_(d.device) : d.device];
  }
}

// The resources an entry holds, each once (a record may name one twice).
std::vector<std::string> LedgerState::UniqueHeld(const ClaimEntry& e) {
  std::vector<std::string> out = e.held;
  if (out.size() > 1) {
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }
  return out;
}

void LedgerState::Erase(const std::string& uid) {
  auto it = entries_.find(uid);
  if (it == entries_.end()) return;
  Count(it->second, -1);
  if (HoldsResources(it->second.state)) {
    for (const auto& r : UniqueHeld(it->second)) {
      auto h = holders_.find(r);
      if (h == holders_.end()) continue;
      std::erase(h->second, uid);
      if (h->second.empty()) holders_.erase(h);
      if (SharesOf(it->second, r).empty()) {
        auto w = whole_holders_.find(r);
        if (w != whole_holders_.end() && --w->second <= 0) whole_holders_.erase(w);
      }
    }
  }
  if (auto r = records_.find(uid); r != records_.end()) {
    live_bytes_ -= r->second.size;
    records_.erase(r);
  }
  entries_.erase(it);
}

bool LedgerState::SameSoleHolding(const ClaimEntry& cur, const ClaimEntry& next) const {
  if (HoldsResources(cur.state) != HoldsResources(next.state) || cur.held != next.held || cur.shares != next.shares) {
    return false;
  }
  if (!HoldsResources(cur.state)) return true;
  for (const auto& r : cur.held) {
    auto h = holders_.find(r);
    if (h == holders_.end() || h->second.size() != 1 || h->second.front() != cur.uid) return false;
  }
  return true;
}

void LedgerState::Put(ClaimEntry e, uint64_t record_size, EntryText text) {
  if (auto it = entries_.find(e.uid); it != entries_.end() && SameSoleHolding(it->second, e)) {
    // A transition of a claim that keeps what it holds (the usual case):
    // the entry is replaced in place and the holders stay as they are.
    Count(it->second, -1);
    Record& rec = records_[e.uid];
    live_bytes_ = live_bytes_ - rec.size + record_size;
    rec = Record{record_size, std::move(text)};
    if (e.state == ClaimState::kTombstone) tombstones_.emplace_back(e.updated, e.uid);
    Count(e, +1);
    it->second = std::move(e);
    return;
  }
  Erase(e.uid);
  if (HoldsResources(e.state)) {
    for (const auto& r : UniqueHeld(e)) {
      // Records are written under the lock after a conflict check, so two
      // live holders mean damage (a lost release record) or a crafted file.
      // Neither is trusted to have let go: both keep the resource until each
      // is released, so no third claim is given it meanwhile.
      auto& hs = holders_[r];
      // Claims that each hold a share of a device hold it together.
      const bool share = !SharesOf(e, r).empty();
      auto w = whole_holders_.find(r);
      const bool all_shares = share && (w == whole_holders_.end() || w->second == 0);
      if (!hs.empty() && !all_shares) {
        // Named by its first holder and the newest: a crafted file with
        // thousands of holders of one device costs a line each, not more.
        std::string who = hs.front() + ", ";
        if (hs.size() > 1) who += "and " + std::to_string(hs.size() - 1) + " more, ";
        double_holds_.push_back(r + " (claims " + who + e.uid + ")");
      }
      hs.push_back(e.uid);
      if (!share) ++whole_holders_[r];
    }
  }
  if (e.state == ClaimState::kTombstone) tombstones_.emplace_back(e.updated, e.uid);
  records_[e.uid] = Record{record_size, std::move(text)};
  live_bytes_ += record_size;
  Count(e, +1);
  std::string uid = e.uid;
  entries_.insert_or_assign(std::move(uid), std::move(e));
}

const EntryText* LedgerState::TextOf(const std::string& uid) const {
  auto it = records_.find(uid);
  return it == records_.end() || !it->second.text.parts ? nullptr : &it->second.text;
}

const ClaimEntry* LedgerState::Find(const std::string& uid) const {
  auto it = entries_.find(uid);
  return it == entries_.end() ? nullptr : &it->second;
}

const ClaimEntry* LedgerState::HolderOf(const std::string& resource) const {
  auto it = holders_.find(resource);
  return it == holders_.end() || it->second.empty() ? nullptr : Find(it->second.front());
}

std::vector<const ClaimEntry*> LedgerState::HoldersOf(const std::string& resource, const std::string& except) const {
  std::vector<const ClaimEntry*> out;
  auto it = holders_.find(resource);
  if (it == holders_.end()) return out;
  for (const auto& uid : it->second) {
    if (uid == except) continue;
    if (const ClaimEntry* e = Find(uid)) out.push_back(e);
  }
  return out;
}

size_t LedgerState::DropExpiredTombstones(std::chrono::system_clock::time_point now, std::chrono::nanoseconds ttl,
                                          bool full_scan) {
  size_t dropped = 0;
  while (!tombstones_.empty() && now - tombstones_.front().first >= ttl) {
    auto [when, uid] = std::move(tombstones_.front());
    tombstones_.pop_front();
    const ClaimEntry* e = Find(uid);
    if (e != nullptr && e->state == ClaimState::kTombstone && e->updated == when) {
      Erase(uid);
      ++dropped;
    }
  }
  if (!full_scan) return dropped;
  std::vector<std::string> expired;
  for (const auto& [uid, e] : entries_) {
    if (e.state == ClaimState::kTombstone && now - e.updated >= ttl) expired.push_back(uid);
  }
  for (const auto& uid : expired) Erase(uid);
  return dropped + expired.size();
}

}  // namespace nvdra::ledger
