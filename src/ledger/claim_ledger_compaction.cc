// ClaimLedger's compaction: the live entries rewritten into a fresh file
// that replaces ledger.log by a rename, when dead bytes warrant it, and the
// reserve file that lets a full volume still compact.
#include <string>

#include "ledger/claim_ledger.h"
#include "ledger/claim_ledger_locked.h"
#include "util/failpoint.h"
#include "util/file_util.h"
#include "util/log.h"

namespace nvdra::ledger {

Status ClaimLedger::CompactLocked() {
  std::string tmp = log_path_ + ".tmp";
  NVDRA_RETURN_IF_ERROR(ClearTempPathLocked());
  state_.DropExpiredTombstones(opts_.clock->Now(), opts_.tombstone_ttl);
  state_.set_generation(state_.generation() + 1);
  nlohmann::json meta = {{"generation", state_.generation()},
                         {"writer", "nvdra"},
                         {"createdUnixMs", UnixMs(opts_.clock->Now())}};
  const LedgerState::Meta& m = state_.meta();
  if (m.lost_claims_since_ms != 0) {
    meta["lostClaimsSinceUnixMs"] = m.lost_claims_since_ms;
    meta["lostClaimsFile"] = m.lost_claims_file;
  }
  if (!m.imported_checkpoint.empty()) meta["importedCheckpoint"] = m.imported_checkpoint;
  std::string data = EncodeFileHeader();
  uint64_t last_start = data.size();
  data += EncodeRecord(static_cast<uint8_t>(RecordType::kMeta), meta.dump());
  uint64_t meta_bytes = data.size();
  LedgerState fresh = NewStateLocked();
  fresh.set_generation(state_.generation());
  fresh.mutable_meta() = m;
  for (const auto& [uid, e] : state_.entries()) {
    EntryText text = EntryJsonParts(e);
    std::string rec = EncodeRecord(static_cast<uint8_t>(RecordType::kEntry), text.json);
    fresh.Put(e, rec.size(), std::move(text));
    last_start = data.size();
    data += rec;
  }
  for (const auto& f : state_.kept_frames()) {
    DecodedRecords d = DecodeRecords(f, 0);
    if (!d.records.empty()) last_start = data.size() + d.records.back().offset;
    data += f;
    for (const auto& r : d.records) (void)fresh.Apply(r);
  }
  // Whatever fails from here, no partial copy stays behind eating space.
  auto fail = [&](Status s) {
    (void)env_->Remove(tmp);
    return s.Wrap("cannot compact claim ledger " + log_path_);
  };
  if (Status s = env_->WriteNewFile(tmp, data); !s.ok()) return fail(s);
  if (Status s = NVDRA_FAILPOINT("ledger-before-compaction-rename"); !s.ok()) return fail(s);
  if (Status s = env_->Rename(tmp, log_path_); !s.ok()) return fail(s);
  file_.reset();
  file_id_ = FileIdentity();
  NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT("ledger-after-compaction-rename"));
  NVDRA_RETURN_IF_ERROR(env_->SyncDir(opts_.dir));
  NVDRA_ASSIGN_OR_RETURN(file_, env_->OpenAppend(log_path_));
  NVDRA_ASSIGN_OR_RETURN(file_id_, env_->Stat(log_path_));
  state_ = std::move(fresh);
  read_offset_ = data.size();
  NoteLastRecordLocked(data, 0, last_start);
  meta_bytes_ = meta_bytes;
  // The rewrite was synced (file and directory) with every record in memory.
  FileReopenedLocked(/*synced=*/true);
  return Status::Ok();
}

Status ClaimLedger::MaybeCompactLocked() {
  // Expired tombstones are dead bytes; dropping them lets compaction reclaim them.
  state_.DropExpiredTombstones(opts_.clock->Now(), opts_.tombstone_ttl, /*full_scan=*/false);
  uint64_t live = meta_bytes_ + state_.live_bytes() + state_.kept_bytes();
  uint64_t dead = read_offset_ > live ? read_offset_ - live : 0;
  if (static_cast<double>(dead) <=
      opts_.compaction_ratio * static_cast<double>(live) + static_cast<double>(compaction_min_bytes_)) {
    return Status::Ok();
  }
  NVDRA_VLOG(4, "compacting claim ledger {}: {} dead bytes, {} live", log_path_, dead, live);
  return CompactLocked();
}

std::string ClaimLedger::ReservePath() const { return JoinPath(opts_.dir, "ledger.reserve"); }

void ClaimLedger::EnsureReserveLocked() {
  if (reserve_bytes_ == 0) return;
  const std::string path = ReservePath();
  auto id = env_->Stat(path);
  if (id.ok() && id->exists && id->size == reserve_bytes_) return;
  if (id.ok() && id->exists) (void)env_->Remove(path);
  Status s = env_->WriteNewFile(path, std::string(reserve_bytes_, '\0'));
  if (!s.ok()) NVDRA_VLOG(2, "claim ledger {}: no space reserved for compaction: {}", log_path_, s.message());
}

Status ClaimLedger::CollectGarbage(bool force_compaction) {
  return Locked([&]() REQUIRES(mu_) -> Status {
    if (force_compaction) return CompactLocked();  // drops every expired tombstone, in a full scan
    // Amortized O(1) per tombstone: this runs under the ledger's mutex every
    // reconcile period, and a full scan would stall requests for O(entries).
    // A tombstone written out of order (a clock step) waits for a compaction.
    return MaybeCompactLocked();
  });
}

}  // namespace nvdra::ledger
