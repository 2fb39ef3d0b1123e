#include "ledger/ledger_state.h"

namespace nvdra::ledger {

std::optional<std::string> LedgerState::Apply(const DecodedRecord& r) {
  auto keep = [&](std::string why) {
    std::string frame = EncodeRecord(r.type, r.payload);
    kept_bytes_ += frame.size();
    kept_frames_.push_back(std::move(frame));
    return std::optional<std::string>(std::move(why));
  };
  if (r.type != static_cast<uint8_t>(RecordType::kMeta) &&
      r.type != static_cast<uint8_t>(RecordType::kEntry)) {
    return keep("record at offset " + std::to_string(r.offset) + " has unknown type " +
                std::to_string(r.type) + " (written by a newer version?); kept as is");
  }
  nlohmann::json j = nlohmann::json::parse(r.payload, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return keep("record at offset " + std::to_string(r.offset) + " is not a JSON object; kept as is");
  }
  if (r.type == static_cast<uint8_t>(RecordType::kMeta)) {
    if (auto it = j.find("generation"); it != j.end() && it->is_number_unsigned()) {
      generation_ = it->get<uint64_t>();
    }
    return std::nullopt;
  }
  auto e = EntryFromJson(j);
  if (!e.ok()) {
    return keep("record at offset " + std::to_string(r.offset) + ": " + e.status().message() +
                "; kept as is");
  }
  Put(std::move(e).value(), r.size);
  return std::nullopt;
}

void LedgerState::Erase(const std::string& uid) {
  auto it = entries_.find(uid);
  if (it == entries_.end()) return;
  if (HoldsResources(it->second.state)) {
    for (const auto& r : it->second.held) {
      auto h = holder_.find(r);
      if (h != holder_.end() && h->second == uid) holder_.erase(h);
    }
  }
  live_bytes_ -= record_size_[uid];
  record_size_.erase(uid);
  entries_.erase(it);
}

void LedgerState::Put(ClaimEntry e, uint64_t record_size) {
  Erase(e.uid);
  if (HoldsResources(e.state)) {
    for (const auto& r : e.held) {
      // Records are written under the lock after a conflict check, so a later
      // record proves the earlier holder let go (its release record was lost).
      auto [it, inserted] = holder_.emplace(r, e.uid);
      if (!inserted && it->second != e.uid) {
        const ClaimEntry* prev = Find(it->second);
        if (prev != nullptr && HoldsResources(prev->state)) ++double_held_;
        it->second = e.uid;
      }
    }
  }
  if (e.state == ClaimState::kTombstone) tombstones_.emplace_back(e.updated, e.uid);
  record_size_[e.uid] = record_size;
  live_bytes_ += record_size;
  std::string uid = e.uid;
  entries_.insert_or_assign(std::move(uid), std::move(e));
}

const ClaimEntry* LedgerState::Find(const std::string& uid) const {
  auto it = entries_.find(uid);
  return it == entries_.end() ? nullptr : &it->second;
}

const ClaimEntry* LedgerState::HolderOf(const std::string& resource) const {
  auto it = holder_.find(resource);
  return it == holder_.end() ? nullptr : Find(it->second);
}

size_t LedgerState::DropExpiredTombstones(std::chrono::system_clock::time_point now,
                                          std::chrono::nanoseconds ttl, bool full_scan) {
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
