// ClaimLedger's files: reading ledger.log (whole, or the tail other
// processes appended), setting aside what cannot be read, quarantining
// damage, and appending one record.
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ledger/claim_ledger.h"
#include "util/failpoint.h"
#include "util/log.h"

namespace nvdra::ledger {
namespace {

std::string BaseName(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::string ClaimLedger::SidePath(const std::string& kind) const {
  std::string base = fmt::format("{}.{}-{}", log_path_, kind, UnixMs(opts_.clock->Now()));
  std::string path = base;
  // Never overwrite an earlier side file: it may be the only copy of that damage.
  for (int n = 1; n < 1000; ++n) {
    auto id = env_->Stat(path);
    if (!id.ok() || !id->exists) break;
    path = base + "-" + std::to_string(n);
  }
  return path;
}

Status ClaimLedger::ClearTempPathLocked() {
  std::string tmp = log_path_ + ".tmp";
  Status s = env_->Remove(tmp);  // a file, or a symbolic link (never followed)
  if (s.ok()) return s;
  std::string aside = SidePath("tmp-blocked");
  Status r = env_->Rename(tmp, aside);
  if (!r.ok()) return Unavailable("cannot clear " + tmp + ": " + s.message() + "; " + r.message());
  report_.warnings.push_back("something that is not a file was in the way at " + tmp + "; it was moved to " + aside);
  return Status::Ok();
}

Status ClaimLedger::SetAsideUnreadableLocked(const std::string& kind, const std::string& why) {
  std::string aside = SidePath(kind);
  NVDRA_RETURN_IF_ERROR(env_->Rename(log_path_, aside));
  state_ = NewStateLocked();
  MarkClaimsMissing(state_.mutable_meta(), opts_.clock->Now(), BaseName(aside));
  Status s = CompactLocked();
  if (!s.ok()) {
    // Put it back: the next start must find it again, not an empty directory.
    (void)env_->Rename(aside, log_path_);
    return s;
  }
  report_.created = true;
  report_.set_aside_file = aside;
  report_.errors.push_back(
      fmt::format("ledger {} {}; it was renamed to {} and a new ledger was started. Its claims are unknown here: "
                  "every CDI spec is kept until they are rebuilt (nvdractl ledger rebuild)",
                  log_path_, why, aside));
  return Status::Ok();
}

Status ClaimLedger::QuarantineLocked(const std::string& bytes, const std::vector<DamagedRange>& damage) {
  std::string out;
  for (const auto& d : damage) {
    out += fmt::format("# offset {} length {}: {}\n", d.offset, d.length, d.reason);
    if (d.offset <= bytes.size()) out.append(bytes, d.offset, d.length);
    out += "\n";
    report_.damaged_bytes += d.length;
  }
  std::string path = SidePath("quarantine");
  Status s = env_->WriteNewFile(path, out);
  if (!s.ok()) {
    (void)env_->Remove(path);
    report_.damaged_bytes = 0;
    return s;
  }
  report_.quarantine_file = path;
  return Status::Ok();
}

void ClaimLedger::RefreshReportLocked() { report_.claims_may_be_missing = ledger::ClaimsMayBeMissing(state_.meta()); }

Status ClaimLedger::OpenExistingForAppendLocked(const FileIdentity& id, uint64_t size, uint64_t meta_bytes) {
  NVDRA_ASSIGN_OR_RETURN(file_, env_->OpenAppend(log_path_));
  file_id_ = id;
  file_id_.size = size;
  read_offset_ = size;
  meta_bytes_ = meta_bytes;
  FileReopenedLocked(/*synced=*/false);
  if (file_ == nullptr) return Unavailable("cannot sync claim ledger " + log_path_);
  return Status::Ok();
}

Status ClaimLedger::CreateWithImportLocked() {
  report_.created = true;
  state_ = NewStateLocked();
  if (legacy_ != nullptr) NVDRA_RETURN_IF_ERROR(legacy_->Import(state_, report_));
  NVDRA_RETURN_IF_ERROR(CompactLocked());
  if (legacy_ != nullptr) legacy_->Retire(report_);
  RefreshReportLocked();
  return Status::Ok();
}

bool ClaimLedger::SetAsideIfUnreadableLocked(DecodedLog& log, const std::string& bytes,
                                             std::vector<DamagedRange>& damage, Status* status) {
  switch (log.header) {
    case HeaderStatus::kOk: return false;
    case HeaderStatus::kBadChecksum:
      // The records carry their own checksums; keep every one that verifies.
      log.body = DecodeRecords(std::string_view(bytes).substr(kFileHeaderSize), kFileHeaderSize);
      damage.push_back({0, kFileHeaderSize, "file header checksum mismatch"});
      return false;
    case HeaderStatus::kEmpty:
      // This ledger is only ever created by a rename of a complete file, so
      // an empty one lost its bytes (a file system that lost data, or a
      // truncation): it is not "no claims".
      *status = SetAsideUnreadableLocked("empty", "was empty (0 bytes)");
      break;
    case HeaderStatus::kTruncated:
      *status = SetAsideUnreadableLocked("unreadable", fmt::format("had a truncated header ({} bytes)", bytes.size()));
      break;
    case HeaderStatus::kBadMagic:
      *status = SetAsideUnreadableLocked("unreadable", "is not a ledger file (bad magic)");
      break;
    case HeaderStatus::kUnsupportedVersion:
      *status = SetAsideUnreadableLocked(fmt::format("v{}", log.version),
                                         fmt::format("has unsupported format version {} (this version reads {})",
                                                     log.version, kFormatVersion));
      break;
  }
  RefreshReportLocked();
  return true;
}

void ClaimLedger::ApplyLogLocked(const DecodedLog& log) {
  state_ = NewStateLocked();
  for (const auto& r : log.body.records) {
    if (auto why = state_.Apply(r)) report_.warnings.push_back(*why);
  }
  report_.records = log.body.records.size();
  report_.expired_tombstones += state_.DropExpiredTombstones(opts_.clock->Now(), opts_.tombstone_ttl);
  report_.claims = state_.entries().size();
  report_.earlier_boot_claims = 0;
  for (const auto& [uid, e] : state_.entries()) {
    if (FromEarlierBoot(e, boot_id_)) ++report_.earlier_boot_claims;
  }
  RefreshReportLocked();
  report_.double_holds = state_.double_holds();
  if (state_.double_held() > 0) {
    // The first few: one line, however many a crafted file holds.
    std::string which;
    const auto& holds = state_.double_holds();
    for (size_t i = 0; i < holds.size() && i < 10; ++i) which += (which.empty() ? "" : "; ") + holds[i];
    if (holds.size() > 10) which += fmt::format("; and {} more", holds.size() - 10);
    report_.errors.push_back(
        fmt::format("ledger {}: {} resources are recorded for two live claims (a release record was lost, or the "
                    "file was edited): {}. Every holder keeps them until it is unprepared",
                    log_path_, state_.double_held(), which));
  }
}

Status ClaimLedger::RepairDamageLocked(const std::string& bytes, const DecodedLog& log,
                                       const std::vector<DamagedRange>& damage, const FileIdentity& id,
                                       uint64_t meta_bytes) {
  uint64_t n = 0;
  for (const auto& d : damage) n += d.length;
  Status q = QuarantineLocked(bytes, damage);
  Status c = q.ok() ? CompactLocked() : Status::Ok();
  if (q.ok() && c.ok()) {
    report_.errors.push_back(
        fmt::format("ledger {} was damaged: {} bytes in {} places did not verify (first: {} at offset {}); "
                    "they were copied to {}; the {} records that verify were kept and the ledger rewritten",
                    log_path_, n, damage.size(), damage.front().reason, damage.front().offset, report_.quarantine_file,
                    log.body.records.size()));
    return Status::Ok();
  }
  // No space to set the damage aside or to rewrite: go on appending to the
  // file as it is (records after damage still verify), rather than fail to
  // start until someone frees space. The next start retries.
  report_.errors.push_back(
      fmt::format("ledger {} was damaged: {} bytes in {} places did not verify (first: {} at offset {}); the {} "
                  "records that verify were kept, but the damage could not be set aside ({}); the ledger goes on "
                  "from the file as it is",
                  log_path_, n, damage.size(), damage.front().reason, damage.front().offset, log.body.records.size(),
                  (q.ok() ? c : q).message()));
  return OpenExistingForAppendLocked(id, bytes.size(), meta_bytes);
}

Status ClaimLedger::ReloadLocked() {
  file_.reset();
  NVDRA_ASSIGN_OR_RETURN(FileIdentity id, env_->Stat(log_path_));
  if (!id.exists) return CreateWithImportLocked();
  NVDRA_ASSIGN_OR_RETURN(std::string bytes, env_->ReadFrom(log_path_, 0));
  DecodedLog log = DecodeLog(bytes);
  std::vector<DamagedRange> damage;
  if (Status aside; SetAsideIfUnreadableLocked(log, bytes, damage, &aside)) return aside;
  damage.insert(damage.end(), log.body.damage.begin(), log.body.damage.end());
  ApplyLogLocked(log);
  uint64_t meta_bytes = kFileHeaderSize;
  if (!log.body.records.empty() && log.body.records.front().type == static_cast<uint8_t>(RecordType::kMeta)) {
    meta_bytes += log.body.records.front().size;
  }
  if (!opened_ && legacy_ != nullptr) legacy_->CheckNextToLedger(state_.meta(), report_);
  last_record_head_.clear();
  if (!log.body.records.empty()) NoteLastRecordLocked(bytes, 0, log.body.records.back().offset);
  if (!damage.empty()) return RepairDamageLocked(bytes, log, damage, id, meta_bytes);
  NVDRA_RETURN_IF_ERROR(OpenExistingForAppendLocked(id, bytes.size(), meta_bytes));
  Status compact = MaybeCompactLocked();
  if (!compact.ok()) NVDRA_WARN("claim ledger {}: compaction failed, retried later: {}", log_path_, compact.message());
  return Status::Ok();
}

Status ClaimLedger::CatchUpLocked() {
  NVDRA_ASSIGN_OR_RETURN(FileIdentity id, env_->Stat(log_path_));
  if (!id.SameFile(file_id_) || id.size < read_offset_) {
    // Another process compacted (new inode) or repaired the file: start over.
    return ReloadLocked();
  }
  if (!last_record_head_.empty()) {
    // Records another process cut off after a failed sync, replaced by as
    // many bytes of other records: the file looks the same by inode and size.
    auto head = file_->ReadAt(last_record_offset_, last_record_head_.size());
    if (!head.ok() || *head != last_record_head_) return ReloadLocked();
  }
  if (id.size == read_offset_) return Status::Ok();
  NVDRA_ASSIGN_OR_RETURN(std::string tail, env_->ReadFrom(log_path_, read_offset_));
  DecodedRecords recs = DecodeRecords(tail, read_offset_);
  if (!recs.damage.empty()) {
    // Another writer died mid-append (we hold the lock, so nobody is writing).
    return ReloadLocked();
  }
  for (const auto& r : recs.records) {
    if (auto why = state_.Apply(r)) report_.warnings.push_back(*why);
  }
  if (!recs.records.empty()) NoteLastRecordLocked(tail, read_offset_, recs.records.back().offset);
  read_offset_ += tail.size();
  file_id_.size = read_offset_;
  truncate_floor_ = read_offset_;  // another process's records: never ours to cut
  return Status::Ok();
}

void ClaimLedger::NoteLastRecordLocked(std::string_view bytes, uint64_t base, uint64_t offset) {
  last_record_offset_ = offset;
  last_record_head_ = std::string(bytes.substr(offset - base, kRecordHeaderSize));
}

Status ClaimLedger::AppendLocked(ClaimEntry e, const char* before_fp, const char* after_fp) {
  NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT(before_fp));
  if (file_ == nullptr) return Unavailable("claim ledger " + log_path_ + " is not open");
  // The parts of the claim's previous record that this one repeats are
  // copied from it, not written again.
  EntryText text = EntryJsonParts(e, state_.Find(e.uid), state_.TextOf(e.uid));
  std::string rec = EncodeRecord(static_cast<uint8_t>(RecordType::kEntry), text.json);
  auto fail = [&](Status s) REQUIRES(mu_) {
    // Cut a partial record off and re-read the file before the next transition.
    (void)file_->Truncate(read_offset_);
    file_.reset();
    file_id_ = FileIdentity();
    return s.Wrap("cannot record claim " + DescribeClaim(e) + " as " + ClaimStateName(e.state) + " in " + log_path_);
  };
  auto append = [&]() REQUIRES(mu_) {
    // One write. Armed, the ledger-mid-append point writes half the record
    // first and fires between the halves: a torn write, as a crash in the
    // middle of a write or a full volume leaves one.
    if (!FailPoints::Process().Armed("ledger-mid-append")) return file_->Append(rec);
    size_t half = rec.size() / 2;
    Status s = file_->Append(std::string_view(rec).substr(0, half));
    if (s.ok()) s = NVDRA_FAILPOINT("ledger-mid-append");
    if (s.ok()) s = file_->Append(std::string_view(rec).substr(half));
    return s;
  };
  Status s = append();
  if (!s.ok() && !IsOutOfSpace(s)) return fail(s);
  if (!s.ok()) {
    Status failed = fail(s);
    // A full volume: the live set is small, so give up the reserve, write
    // the ledger anew without its dead records, retry once, and take the
    // reserve back (what the volume still allows).
    const uint64_t before = read_offset_;
    (void)env_->Remove(ReservePath());
    Status compacted = CompactLocked();
    if (compacted.ok()) s = append();
    if (!compacted.ok() || !s.ok()) {
      if (compacted.ok()) {
        (void)fail(s);
      } else {
        NVDRA_WARN("claim ledger {}: the volume is full and compacting the ledger to make room failed: {}", log_path_,
                   compacted.message());
      }
      EnsureReserveLocked();
      return failed;
    }
    NVDRA_WARN("claim ledger {}: a record did not fit ({}); the ledger was compacted from {} to {} bytes and the "
               "record written",
               log_path_, failed.message(), before, read_offset_);
    EnsureReserveLocked();
  }
  NoteLastRecordLocked(rec, read_offset_, read_offset_);
  read_offset_ += rec.size();
  file_id_.size = read_offset_;
  // Durable before the transition returns: Locked waits for a sync that
  // covers this record (group commit), once the locks are released.
  commit_seq_ = ++appended_seq_;
  commit_what_.assign("claim ").append(DescribeClaim(e)).append(" as ").append(ClaimStateName(e.state));
  NVDRA_VLOG(6, "claim ledger: {} -> {}", DescribeClaim(e), ClaimStateName(e.state));
  state_.Put(std::move(e), rec.size(), std::move(text));
  NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT(after_fp));
  // The transition is durable: a compaction that cannot run now (a full
  // disk) is retried after a later one, and never fails this one.
  Status compact = MaybeCompactLocked();
  if (!compact.ok()) {
    NVDRA_WARN("claim ledger {}: compaction failed, retried later: {}", log_path_, compact.message());
  }
  return Status::Ok();
}

}  // namespace nvdra::ledger
