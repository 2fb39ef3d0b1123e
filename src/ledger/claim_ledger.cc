#include "ledger/claim_ledger.h"

#include <algorithm>
#include <mutex>
#include <random>
#include <utility>

#include <fmt/format.h>

#include "util/failpoint.h"
#include "util/file_util.h"
#include "util/log.h"
#include "util/uid.h"

namespace nvdra::ledger {
namespace {

std::string BaseName(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A fresh name for one BeginPrepare: unique across processes and restarts
// with overwhelming probability.
std::string NewAttempt() {
  static std::mutex mu;
  static std::random_device device;
  std::lock_guard<std::mutex> l(mu);
  uint64_t hi = (static_cast<uint64_t>(device()) << 32) | device();
  uint64_t lo = (static_cast<uint64_t>(device()) << 32) | device();
  return fmt::format("{:016x}{:016x}", hi, lo);
}

}  // namespace

ClaimLedger::ClaimLedger(const LedgerOptions& options)
    : opts_(options),
      env_(options.env != nullptr ? options.env : &LedgerEnv::Posix()),
      log_path_(JoinPath(options.dir, kLogFileName)),
      lock_path_(JoinPath(options.dir, kLockFileName)) {}

ClaimLedger::~ClaimLedger() {
  Status s = Flush();
  if (!s.ok()) NVDRA_WARN("claim ledger {}: {}", opts_.dir, s.message());
}

Status ClaimLedger::Flush() {
  uint64_t seq = 0;
  {
    MutexLock l(mu_);
    if (durable_seq_ >= appended_seq_) return Status::Ok();
    seq = appended_seq_;
  }
  Status s = WaitDurable(seq);
  return s.ok() ? s : s.Wrap("cannot sync " + log_path_);
}

std::string ClaimLedger::log_path() const { return log_path_; }

// Touches the new ledger's guarded state outside its lock where no other
// thread can see the object yet; the analysis cannot know that.
Result<std::unique_ptr<ClaimLedger>> ClaimLedger::Open(const LedgerOptions& options) NO_THREAD_SAFETY_ANALYSIS {
  if (options.dir.empty()) return InvalidArgument("ledger directory is empty");
  std::unique_ptr<ClaimLedger> l(new ClaimLedger(options));
  NVDRA_RETURN_IF_ERROR(l->env_->MakeDirs(options.dir).Wrap("cannot create ledger directory"));
  // Before anything is read: a rollback retiring this ledger must see us.
  auto holder = LedgerHolderLock::HoldShared(
      options.dir, std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(options.lock_timeout));
  if (!holder.ok()) return holder.status().Wrap("cannot open claim ledger in " + options.dir);
  l->holder_ = std::move(holder).value();
  l->boot_id_ = options.boot_id;
  if (l->boot_id_.empty()) {
    auto b = ReadBootId(options.boot_id_path);
    if (b.ok()) {
      l->boot_id_ = *b;
    } else {
      // Without a boot id every entry looks like this boot's; say so, but run.
      l->report_.warnings.push_back("cannot read boot id: " + b.status().message());
    }
  }
  if (options.import_legacy_checkpoint) {
    l->legacy_ = std::make_unique<LegacyCheckpointMigration>(LegacyCheckpointMigration::Options{
        l->env_, options.dir, options.codec, l->boot_id_, options.clock, options.lock_timeout});
  }
  // A small volume (a tmpfs of some hundred KiB) compacts early and keeps a
  // smaller reserve, so the ledger never fills it with dead records.
  const uint64_t volume = l->env_->VolumeBytes(options.dir);
  l->compaction_min_bytes_ = volume == 0 ? options.compaction_min_bytes
                                         : std::min<uint64_t>(options.compaction_min_bytes, volume / 16);
  l->reserve_bytes_ = volume == 0 ? options.reserve_bytes : std::min<uint64_t>(options.reserve_bytes, volume / 16);
  // Runs under l->mu_; see above for why it is not analysed.
  Status s = l->Locked([&]() NO_THREAD_SAFETY_ANALYSIS -> Status {
    // A crash left a compaction behind, or something was planted there; what
    // cannot be removed is set aside, so it never keeps the ledger from opening.
    Status clear = l->ClearTempPathLocked();
    if (!clear.ok()) l->report_.warnings.push_back(clear.message());
    NVDRA_RETURN_IF_ERROR(l->ReloadLocked());
    l->EnsureReserveLocked();
    return Status::Ok();
  });
  if (l->legacy_ != nullptr) l->legacy_->ReleaseLock();  // the Go driver's pu.lock, held during Open only
  if (!s.ok()) return s.Wrap("cannot open claim ledger in " + options.dir);
  l->opened_ = true;
  for (const auto& e : l->report_.errors) NVDRA_ERROR("claim ledger {}: {}", options.dir, e);
  return l;
}

template <typename F>
auto ClaimLedger::Locked(F&& fn, RequestStep step, Ack ack) -> decltype(fn()) {
  std::optional<decltype(fn())> result;
  uint64_t seq = 0;
  std::string what;
  {
    TimedStep critical(step);
    MutexLock guard(mu_);
    auto lock = env_->Lock(lock_path_, std::chrono::steady_clock::now() +
                                            std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                opts_.lock_timeout));
    if (!lock.ok()) return lock.status();
    flock_held_ = true;
    commit_seq_ = 0;
    if (opened_) {
      Status s = file_ != nullptr ? CatchUpLocked() : ReloadLocked();
      if (!s.ok()) {
        flock_held_ = false;
        return s;
      }
    }
    result.emplace(fn());
    seq = std::exchange(commit_seq_, 0);
    what = std::move(commit_what_);
    flock_held_ = false;
  }  // the cross-process lock, then mu_, are released here
  if (seq != 0 && ack == Ack::kDurable) {
    // Only now is the transition acknowledged: its record is durable.
    TimedStep sync(RequestStep::kSyncStarted);
    Status s = WaitDurable(seq);
    if (!s.ok()) return s.Wrap("cannot record " + what + " in " + log_path_);
  }
  return std::move(*result);
}

Status ClaimLedger::WaitDurable(uint64_t seq) {
  MutexLock l(mu_);
  for (;;) {
    Status why;
    if (FailedLocked(seq, &why)) return why;
    if (durable_seq_ >= seq) return Status::Ok();
    if (syncing_) {
      synced_cv_.Wait(mu_);
      continue;
    }
    if (file_ == nullptr) {
      // A failed append or sync closed the file: reopening it syncs (or
      // fails) what is pending.
      auto lock = env_->Lock(lock_path_, std::chrono::steady_clock::now() +
                                              std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                  opts_.lock_timeout));
      flock_held_ = lock.ok();
      Status s = lock.ok() ? ReloadLocked() : lock.status();
      if (!s.ok()) FailPendingLocked(s);
      flock_held_ = false;
      if (durable_seq_ < seq && !FailedLocked(seq, &why)) FailPendingLocked(Unavailable("the ledger was reopened"));
      continue;
    }
    // Lead: one fdatasync for every record appended so far.
    syncing_ = true;
    std::shared_ptr<AppendFile> f = file_;
    uint64_t target = appended_seq_, target_offset = read_offset_;
    l.Unlock();
    Status s = f->Sync();
    l.Lock();
    syncing_ = false;
    if (s.ok()) {
      durable_seq_ = std::max(durable_seq_, target);
      if (file_ == f) {
        durable_offset_ = std::max(durable_offset_, target_offset);
        truncate_floor_ = std::max(truncate_floor_, durable_offset_);
      }
    } else if (durable_seq_ < target) {
      FailPendingLocked(s);
    }
    synced_cv_.NotifyAll();
  }
}

bool ClaimLedger::FailedLocked(uint64_t seq, Status* why) const {
  for (const auto& r : failed_) {
    if (seq >= r.from && seq <= r.to) {
      *why = r.why;
      return true;
    }
  }
  return false;
}

void ClaimLedger::FailPendingLocked(const Status& why) {
  if (durable_seq_ < appended_seq_) {
    if (failed_.size() >= 16) failed_.erase(failed_.begin());
    failed_.push_back({durable_seq_ + 1, appended_seq_, why});
    // Every record appended so far is settled (durable or failed).
    durable_seq_ = appended_seq_;
  }
  if (file_ == nullptr) return;
  // Cut our records off so a failed transition stays unrecorded, unless
  // another process appended after them (its records are not ours to cut).
  auto id = env_->Stat(log_path_);
  if (id.ok() && id->SameFile(file_id_) && id->size == read_offset_ && truncate_floor_ < read_offset_) {
    Result<std::unique_ptr<FileLock>> lock = std::unique_ptr<FileLock>();
    if (!flock_held_) {
      lock = env_->Lock(lock_path_, std::chrono::steady_clock::now() +
                                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                            opts_.lock_timeout));
    }
    auto again = lock.ok() ? env_->Stat(log_path_) : Result<FileIdentity>(lock.status());
    if (again.ok() && again->SameFile(file_id_) && again->size == read_offset_) {
      (void)file_->Truncate(truncate_floor_);
    }
  }
  // The next transition re-reads the file: memory holds records that failed.
  file_.reset();
  file_id_ = FileIdentity();
}

void ClaimLedger::FileReopenedLocked(bool synced) {
  if (!synced && durable_seq_ < appended_seq_) {
    // Our pending records are in this file (a compaction by another process
    // read them first); make them durable before anyone is told so.
    Status s = file_->Sync();
    if (!s.ok()) {
      FailPendingLocked(s);
      return;
    }
  }
  durable_seq_ = appended_seq_;
  durable_offset_ = read_offset_;
  truncate_floor_ = read_offset_;
  synced_cv_.NotifyAll();
}

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
  report_.warnings.push_back("something that is not a file was in the way at " + tmp +
                             "; it was moved to " + aside);
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
  report_.errors.push_back(fmt::format(
      "ledger {} {}; it was renamed to {} and a new ledger was started. Its claims are unknown here: "
      "every CDI spec is kept until they are rebuilt (nvdractl ledger rebuild)",
      log_path_, why, aside));
  return Status::Ok();
}

Status ClaimLedger::QuarantineLocked(const std::string& bytes,
                                     const std::vector<DamagedRange>& damage) {
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

void ClaimLedger::RefreshReportLocked() {
  report_.claims_may_be_missing = ledger::ClaimsMayBeMissing(state_.meta());
}

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
    case HeaderStatus::kOk:
      return false;
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
      *status = SetAsideUnreadableLocked("unreadable",
                                         fmt::format("had a truncated header ({} bytes)", bytes.size()));
      break;
    case HeaderStatus::kBadMagic:
      *status = SetAsideUnreadableLocked("unreadable", "is not a ledger file (bad magic)");
      break;
    case HeaderStatus::kUnsupportedVersion:
      *status = SetAsideUnreadableLocked(
          fmt::format("v{}", log.version),
          fmt::format("has unsupported format version {} (this version reads {})", log.version, kFormatVersion));
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
    report_.errors.push_back(fmt::format(
        "ledger {}: {} resources are recorded for two live claims (a release record was lost, or the "
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
    report_.errors.push_back(fmt::format(
        "ledger {} was damaged: {} bytes in {} places did not verify (first: {} at offset {}); "
        "they were copied to {}; the {} records that verify were kept and the ledger rewritten",
        log_path_, n, damage.size(), damage.front().reason, damage.front().offset,
        report_.quarantine_file, log.body.records.size()));
    return Status::Ok();
  }
  // No space to set the damage aside or to rewrite: go on appending to the
  // file as it is (records after damage still verify), rather than fail to
  // start until someone frees space. The next start retries.
  report_.errors.push_back(fmt::format(
      "ledger {} was damaged: {} bytes in {} places did not verify (first: {} at offset {}); the {} "
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
    std::string rec = EncodeRecord(static_cast<uint8_t>(RecordType::kEntry), EntryJsonText(e));
    fresh.Put(e, rec.size());
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

Status ClaimLedger::AppendLocked(const ClaimEntry& e, const char* before_fp, const char* after_fp) {
  NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT(before_fp));
  if (file_ == nullptr) return Unavailable("claim ledger " + log_path_ + " is not open");
  std::string rec = EncodeRecord(static_cast<uint8_t>(RecordType::kEntry), EntryJsonText(e));
  auto fail = [&](Status s) REQUIRES(mu_) {
    // Cut a partial record off and re-read the file before the next transition.
    (void)file_->Truncate(read_offset_);
    file_.reset();
    file_id_ = FileIdentity();
    return s.Wrap("cannot record claim " + DescribeClaim(e) + " as " + ClaimStateName(e.state) +
                  " in " + log_path_);
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
        NVDRA_WARN("claim ledger {}: the volume is full and compacting the ledger to make room failed: {}",
                   log_path_, compacted.message());
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
  state_.Put(e, rec.size());
  // Durable before the transition returns: Locked waits for a sync that
  // covers this record (group commit), once the locks are released.
  commit_seq_ = ++appended_seq_;
  commit_what_ = "claim " + DescribeClaim(e) + " as " + ClaimStateName(e.state);
  NVDRA_VLOG(6, "claim ledger: {} -> {}", DescribeClaim(e), ClaimStateName(e.state));
  NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT(after_fp));
  // The transition is durable: a compaction that cannot run now (a full
  // disk) is retried after a later one, and never fails this one.
  Status compact = MaybeCompactLocked();
  if (!compact.ok()) {
    NVDRA_WARN("claim ledger {}: compaction failed, retried later: {}", log_path_, compact.message());
  }
  return Status::Ok();
}

ClaimEntry ClaimLedger::Decorate(ClaimEntry e) const {
  e.from_earlier_boot = FromEarlierBoot(e, boot_id_);
  return e;
}

const ClaimEntry* ClaimLedger::FindLive(const std::string& uid) const {
  const ClaimEntry* e = state_.Find(uid);
  if (e != nullptr && e->state == ClaimState::kTombstone &&
      opts_.clock->Now() - e->updated >= opts_.tombstone_ttl) {
    return nullptr;
  }
  return e;
}

TransitionContext ClaimLedger::ContextLocked() const {
  TransitionContext ctx;
  ctx.boot_id = boot_id_;
  ctx.now = opts_.clock->Now();
  ctx.tombstone_ttl = opts_.tombstone_ttl;
  ctx.codec = opts_.codec;
  // Called by the transition, which runs under mu_ (see Locked).
  ctx.other_holder = [this](const std::string& resource,
                            const std::string& except) NO_THREAD_SAFETY_ANALYSIS -> std::optional<std::string> {
    auto holders = state_.HoldersOf(resource, except);
    if (holders.empty()) return std::nullopt;
    return holders.front()->uid;
  };
  ctx.other_holders = [this](const std::string& resource,
                             const std::string& except) NO_THREAD_SAFETY_ANALYSIS -> std::vector<const ClaimEntry*> {
    return state_.HoldersOf(resource, except);
  };
  return ctx;
}

Status ClaimLedger::RecordLocked(const Transition& t, const char* before_fp, const char* after_fp) {
  if (!t.write || !t.entry) return Status::Ok();
  return AppendLocked(*t.entry, before_fp, after_fp);
}

Result<BeginResult> ClaimLedger::BeginPrepare(const BeginPrepareRequest& req) {
  NVDRA_RETURN_IF_ERROR(ValidateClaimUid(req.uid));
  return Locked([&]() REQUIRES(mu_) -> Result<BeginResult> {
    TransitionContext ctx = ContextLocked();
    // An entry imported from an old checkpoint, or rebuilt, has no name:
    // take it from the first Prepare, so the reconciler can check the claim.
    NVDRA_RETURN_IF_ERROR(RecordLocked(transition::AdoptName(FindLive(req.uid), req.ns, req.name, ctx),
                                       "ledger-before-name-write", "ledger-after-name-write"));
    ctx.new_attempt = NewAttempt();
    NVDRA_ASSIGN_OR_RETURN(Transition t, transition::BeginPrepare(FindLive(req.uid), req, ctx));
    NVDRA_RETURN_IF_ERROR(RecordLocked(t, "ledger-before-started-write", "ledger-after-started-write"));
    return BeginResult{t.outcome, Decorate(std::move(*t.entry))};
  }, RequestStep::kAppendStarted);
}

Status ClaimLedger::AdoptName(const std::string& uid, const std::string& ns, const std::string& name) {
  if (name.empty()) return Status::Ok();
  return Locked([&]() REQUIRES(mu_) -> Status {
    return RecordLocked(transition::AdoptName(FindLive(uid), ns, name, ContextLocked()), "ledger-before-name-write",
                        "ledger-after-name-write");
  });
}

Result<bool> ClaimLedger::ClaimsMayBeMissing() {
  return Locked([&]() REQUIRES(mu_) -> Result<bool> {
    RefreshReportLocked();
    return ledger::ClaimsMayBeMissing(state_.meta());
  });
}

Status ClaimLedger::RebuildEntry(const RebuiltClaim& c) {
  NVDRA_RETURN_IF_ERROR(ValidateClaimUid(c.uid));
  return Locked([&]() REQUIRES(mu_) -> Status {
    NVDRA_ASSIGN_OR_RETURN(Transition t, RebuildTransition(FindLive(c.uid), c, ContextLocked()));
    if (!t.write) return Status::Ok();
    NVDRA_WARN("claim ledger: rebuilt the entry of claim {} from {} ({} devices)", DescribeClaim(*t.entry), c.source,
               t.entry->prepared.size());
    return RecordLocked(t, "ledger-before-rebuild-write", "ledger-after-rebuild-write");
  });
}

Status ClaimLedger::FinishRecovery() {
  return Locked([&]() REQUIRES(mu_) -> Status {
    if (!ledger::ClaimsMayBeMissing(state_.meta())) return Status::Ok();
    LedgerState::Meta before = state_.meta();
    ClearClaimsMissing(state_.mutable_meta());
    Status s = CompactLocked();
    if (!s.ok()) {
      state_.mutable_meta() = before;
      return s;
    }
    RefreshReportLocked();
    NVDRA_INFO("claim ledger {}: recovery finished; the ledger is the truth again", log_path_);
    return Status::Ok();
  });
}

Status ClaimLedger::CompletePrepare(const std::string& uid, std::vector<PreparedDevice> prepared,
                                    nlohmann::json undo, std::optional<std::string> attempt) {
  return Locked([&]() REQUIRES(mu_) -> Status {
    NVDRA_ASSIGN_OR_RETURN(Transition t, transition::CompletePrepare(FindLive(uid), uid, std::move(prepared),
                                                                     std::move(undo), attempt, ContextLocked()));
    return RecordLocked(t, "ledger-before-completed-write", "ledger-after-completed-write");
  }, RequestStep::kAppendFinal, Ack::kAppended);
}

Result<std::optional<ClaimEntry>> ClaimLedger::BeginUnprepare(const std::string& uid) {
  return Locked([&]() REQUIRES(mu_) -> Result<std::optional<ClaimEntry>> {
    NVDRA_ASSIGN_OR_RETURN(Transition t, transition::BeginUnprepare(FindLive(uid), ContextLocked()));
    NVDRA_RETURN_IF_ERROR(RecordLocked(t, "ledger-before-unprepare-write", "ledger-after-unprepare-write"));
    if (!t.entry) return std::optional<ClaimEntry>();
    return std::optional(Decorate(std::move(*t.entry)));
  }, RequestStep::kAppendStarted);
}

Status ClaimLedger::FinishUnprepare(const std::string& uid) {
  return Locked([&]() REQUIRES(mu_) -> Status {
    NVDRA_ASSIGN_OR_RETURN(Transition t, transition::FinishUnprepare(FindLive(uid), ContextLocked()));
    if (!t.write) return Status::Ok();
    NVDRA_RETURN_IF_ERROR(RecordLocked(t, "ledger-before-tombstone-write", "ledger-after-tombstone-write"));
    // Upstream's words, which operators grep for.
    NVDRA_VLOG(6, "Deleted claim from checkpoint: {}/{} (claim {})", t.entry->ns, t.entry->name, t.entry->uid);
    return Status::Ok();
  }, RequestStep::kAppendFinal, Ack::kAppended);
}

Result<std::vector<ClaimEntry>> ClaimLedger::List() {
  return Locked([&]() REQUIRES(mu_) -> Result<std::vector<ClaimEntry>> {
    std::vector<ClaimEntry> out;
    for (const auto& [uid, e] : state_.entries()) {
      if (FindLive(uid) != nullptr) out.push_back(Decorate(e));
    }
    return out;
  });
}

Result<std::optional<ClaimEntry>> ClaimLedger::Get(const std::string& uid) {
  return Locked([&]() REQUIRES(mu_) -> Result<std::optional<ClaimEntry>> {
    const ClaimEntry* e = FindLive(uid);
    if (e == nullptr) return std::optional<ClaimEntry>();
    return std::optional(Decorate(*e));
  });
}

Result<std::optional<ClaimEntry>> ClaimLedger::HolderOf(const std::string& resource) {
  return Locked([&]() REQUIRES(mu_) -> Result<std::optional<ClaimEntry>> {
    const ClaimEntry* e = state_.HolderOf(resource);
    if (e == nullptr) return std::optional<ClaimEntry>();
    return std::optional(Decorate(*e));
  });
}

Result<std::vector<ClaimEntry>> ClaimLedger::HoldersOf(const std::string& resource, const std::string& except) {
  return Locked([&]() REQUIRES(mu_) -> Result<std::vector<ClaimEntry>> {
    std::vector<ClaimEntry> out;
    for (const ClaimEntry* e : state_.HoldersOf(resource, except)) out.push_back(Decorate(*e));
    return out;
  });
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

LedgerState ClaimLedger::NewStateLocked() const {
  LedgerState s;
  s.set_device_classifier(classify_);
  return s;
}

void ClaimLedger::SetDeviceClassifier(LedgerState::DeviceClassifier classify) {
  MutexLock l(mu_);
  classify_ = std::move(classify);
  state_.set_device_classifier(classify_);
}

LedgerCounts ClaimLedger::Counts() const {
  MutexLock l(mu_);
  LedgerCounts c;
  for (size_t i = 0; i < kClaimStateCount; ++i) c.claims[i] = state_.count(static_cast<ClaimState>(i));
  c.prepared_devices = state_.prepared_devices();
  c.bytes = read_offset_;
  return c;
}

OpenReport ClaimLedger::report() const {
  MutexLock l(mu_);
  return report_;
}

}  // namespace nvdra::ledger
