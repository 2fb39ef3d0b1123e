#include "ledger/claim_ledger.h"

#include <algorithm>

#include <fmt/format.h>

#include "ledger/legacy_checkpoint.h"
#include "util/failpoint.h"
#include "util/file_util.h"
#include "util/log.h"
#include "util/uid.h"

namespace nvdra::ledger {
namespace {

int64_t UnixMs(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

std::vector<std::string> SortedUnique(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

std::string Describe(const ClaimEntry& e) {
  if (e.ns.empty() && e.name.empty()) return e.uid;
  return model::ClaimRef{e.ns, e.uid, e.name}.ToString();
}

}  // namespace

const char* BeginOutcomeName(BeginOutcome o) {
  switch (o) {
    case BeginOutcome::kStarted: return "Started";
    case BeginOutcome::kRetry: return "Retry";
    case BeginOutcome::kAlreadyPrepared: return "AlreadyPrepared";
    case BeginOutcome::kRedoAfterReboot: return "RedoAfterReboot";
  }
  return "Unknown";
}

std::string OpenReport::Summary() const {
  std::string s = fmt::format("{} claims from {} records{}", claims, records,
                              created ? " (new ledger)" : "");
  if (earlier_boot_claims > 0) s += fmt::format(", {} from an earlier boot", earlier_boot_claims);
  if (expired_tombstones > 0) s += fmt::format(", {} expired tombstones dropped", expired_tombstones);
  for (const auto& e : errors) s += "; ERROR: " + e;
  for (const auto& w : warnings) s += "; warning: " + w;
  return s;
}

ClaimLedger::ClaimLedger(const LedgerOptions& options)
    : opts_(options),
      env_(options.env != nullptr ? options.env : &LedgerEnv::Posix()),
      log_path_(JoinPath(options.dir, kLogFileName)),
      lock_path_(JoinPath(options.dir, kLockFileName)) {}

ClaimLedger::~ClaimLedger() = default;

std::string ClaimLedger::log_path() const { return log_path_; }

Result<std::unique_ptr<ClaimLedger>> ClaimLedger::Open(const LedgerOptions& options) {
  if (options.dir.empty()) return InvalidArgument("ledger directory is empty");
  std::unique_ptr<ClaimLedger> l(new ClaimLedger(options));
  NVDRA_RETURN_IF_ERROR(l->env_->MakeDirs(options.dir).Wrap("cannot create ledger directory"));
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
  Status s = l->Locked([&]() -> Status {
    NVDRA_RETURN_IF_ERROR(l->env_->Remove(l->log_path_ + ".tmp"));
    return l->ReloadLocked();
  });
  if (!s.ok()) return s.Wrap("cannot open claim ledger in " + options.dir);
  l->opened_ = true;
  for (const auto& e : l->report_.errors) spdlog::error("claim ledger {}: {}", options.dir, e);
  return l;
}

template <typename F>
auto ClaimLedger::Locked(F&& fn) -> decltype(fn()) {
  std::lock_guard<std::mutex> guard(mu_);
  auto lock = env_->Lock(lock_path_, std::chrono::steady_clock::now() +
                                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                              opts_.lock_timeout));
  if (!lock.ok()) return lock.status();
  if (opened_) {
    Status s = file_ != nullptr ? CatchUpLocked() : ReloadLocked();
    if (!s.ok()) return s;
  }
  return fn();
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

Status ClaimLedger::CreateFreshLocked() {
  state_ = LedgerState();
  return CompactLocked();
}

void ClaimLedger::ImportLegacyLocked() {
  if (!opts_.import_legacy_checkpoint) return;
  std::string path = JoinPath(opts_.dir, kLegacyCheckpointFileName);
  auto st = env_->Stat(path);
  if (!st.ok() || !st->exists) return;
  auto text = env_->ReadFrom(path, 0);
  if (!text.ok()) {
    report_.errors.push_back("cannot read the Go driver's " + path + ": " + text.status().message());
    return;
  }
  auto imported = ParseLegacyCheckpoint(*text, opts_.driver_name, boot_id_);
  if (!imported.ok()) {
    report_.errors.push_back("cannot import " + path + ": " + imported.status().message() +
                             "; claims it recorded must be cleaned up by the reconciler");
    return;
  }
  for (auto& e : imported->entries) {
    e.updated = opts_.clock->Now();
    if (!boot_id_.empty() && e.boot_id != boot_id_) ++report_.earlier_boot_claims;
    std::string rec = EncodeRecord(static_cast<uint8_t>(RecordType::kEntry), EntryToJson(e).dump());
    state_.Put(std::move(e), rec.size());
  }
  report_.imported_legacy_claims = imported->entries.size();
  report_.claims = state_.entries().size();
  for (const auto& w : imported->warnings) report_.warnings.push_back(w);
  report_.warnings.push_back(fmt::format(
      "imported {} claims from the Go driver's {} (left unchanged)", imported->entries.size(), path));
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
  NVDRA_RETURN_IF_ERROR(env_->WriteNewFile(path, out));
  report_.quarantine_file = path;
  return Status::Ok();
}

Status ClaimLedger::ReloadLocked() {
  file_.reset();
  NVDRA_ASSIGN_OR_RETURN(FileIdentity id, env_->Stat(log_path_));
  if (!id.exists) {
    report_.created = true;
    state_ = LedgerState();
    ImportLegacyLocked();
    return CompactLocked();
  }
  NVDRA_ASSIGN_OR_RETURN(std::string bytes, env_->ReadFrom(log_path_, 0));
  DecodedLog log = DecodeLog(bytes);
  std::vector<DamagedRange> damage;
  switch (log.header) {
    case HeaderStatus::kOk:
      break;
    case HeaderStatus::kEmpty:
      // Creation was interrupted before the header was durable: nothing was acknowledged.
      report_.created = true;
      return CreateFreshLocked();
    case HeaderStatus::kTruncated:
      damage.push_back({0, bytes.size(), "truncated file header"});
      NVDRA_RETURN_IF_ERROR(QuarantineLocked(bytes, damage));
      report_.errors.push_back(fmt::format(
          "ledger {} had a truncated header ({} bytes); its bytes were copied to {} and a new "
          "ledger was started",
          log_path_, bytes.size(), report_.quarantine_file));
      return CreateFreshLocked();
    case HeaderStatus::kBadChecksum:
      // The records carry their own checksums; keep every one that verifies.
      log.body = DecodeRecords(std::string_view(bytes).substr(kFileHeaderSize), kFileHeaderSize);
      damage.push_back({0, kFileHeaderSize, "file header checksum mismatch"});
      break;
    case HeaderStatus::kBadMagic:
    case HeaderStatus::kUnsupportedVersion: {
      std::string aside = log.header == HeaderStatus::kBadMagic
                              ? SidePath("unreadable")
                              : SidePath(fmt::format("v{}", log.version));
      NVDRA_RETURN_IF_ERROR(env_->Rename(log_path_, aside));
      report_.set_aside_file = aside;
      report_.errors.push_back(fmt::format(
          "ledger {} is {}{}; it was moved to {} and a new, empty ledger was started (claims "
          "prepared before cannot be unprepared from the ledger; check the node's pods)",
          log_path_, HeaderStatusName(log.header),
          log.header == HeaderStatus::kUnsupportedVersion
              ? fmt::format(" {} (this version reads {})", log.version, kFormatVersion)
              : "",
          aside));
      return CreateFreshLocked();
    }
  }
  damage.insert(damage.end(), log.body.damage.begin(), log.body.damage.end());
  state_ = LedgerState();
  for (const auto& r : log.body.records) {
    if (auto why = state_.Apply(r)) report_.warnings.push_back(*why);
  }
  report_.records = log.body.records.size();
  report_.expired_tombstones +=
      state_.DropExpiredTombstones(opts_.clock->Now(), opts_.tombstone_ttl);
  report_.claims = state_.entries().size();
  report_.earlier_boot_claims = 0;
  for (const auto& [uid, e] : state_.entries()) {
    if (e.state != ClaimState::kTombstone && !boot_id_.empty() && e.boot_id != boot_id_) {
      ++report_.earlier_boot_claims;
    }
  }
  if (state_.double_held() > 0) {
    report_.errors.push_back(fmt::format(
        "ledger {}: {} resources are recorded for two live claims (a release record was lost); "
        "the later claim holds them, the stale claim stays listed until it is unprepared",
        log_path_, state_.double_held()));
  }
  if (!damage.empty()) {
    NVDRA_RETURN_IF_ERROR(QuarantineLocked(bytes, damage));
    uint64_t n = 0;
    for (const auto& d : damage) n += d.length;
    report_.errors.push_back(fmt::format(
        "ledger {} was damaged: {} bytes in {} places did not verify (first: {} at offset {}); "
        "they were copied to {}; the {} records that verify were kept and the ledger rewritten",
        log_path_, n, damage.size(), damage.front().reason, damage.front().offset,
        report_.quarantine_file, log.body.records.size()));
    return CompactLocked();
  }
  NVDRA_ASSIGN_OR_RETURN(file_, env_->OpenAppend(log_path_));
  file_id_ = id;
  file_id_.size = bytes.size();
  read_offset_ = bytes.size();
  meta_bytes_ = kFileHeaderSize;
  if (!log.body.records.empty() && log.body.records.front().type ==
                                        static_cast<uint8_t>(RecordType::kMeta)) {
    meta_bytes_ += log.body.records.front().size;
  }
  return MaybeCompactLocked();
}

Status ClaimLedger::CatchUpLocked() {
  NVDRA_ASSIGN_OR_RETURN(FileIdentity id, env_->Stat(log_path_));
  if (!id.SameFile(file_id_) || id.size < read_offset_) {
    // Another process compacted (new inode) or repaired the file: start over.
    return ReloadLocked();
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
  read_offset_ += tail.size();
  file_id_.size = read_offset_;
  return Status::Ok();
}

Status ClaimLedger::CompactLocked() {
  std::string tmp = log_path_ + ".tmp";
  state_.DropExpiredTombstones(opts_.clock->Now(), opts_.tombstone_ttl);
  state_.set_generation(state_.generation() + 1);
  nlohmann::json meta = {{"generation", state_.generation()},
                         {"writer", "nvdra"},
                         {"createdUnixMs", UnixMs(opts_.clock->Now())}};
  std::string data = EncodeFileHeader();
  data += EncodeRecord(static_cast<uint8_t>(RecordType::kMeta), meta.dump());
  uint64_t meta_bytes = data.size();
  LedgerState fresh;
  fresh.set_generation(state_.generation());
  for (const auto& [uid, e] : state_.entries()) {
    std::string rec = EncodeRecord(static_cast<uint8_t>(RecordType::kEntry), EntryToJson(e).dump());
    fresh.Put(e, rec.size());
    data += rec;
  }
  for (const auto& f : state_.kept_frames()) {
    data += f;
    DecodedRecords d = DecodeRecords(f, 0);
    for (const auto& r : d.records) (void)fresh.Apply(r);
  }
  NVDRA_RETURN_IF_ERROR(env_->WriteNewFile(tmp, data));
  NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT("ledger-before-compaction-rename"));
  NVDRA_RETURN_IF_ERROR(env_->Rename(tmp, log_path_));
  file_.reset();
  file_id_ = FileIdentity();
  NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT("ledger-after-compaction-rename"));
  NVDRA_RETURN_IF_ERROR(env_->SyncDir(opts_.dir));
  NVDRA_ASSIGN_OR_RETURN(file_, env_->OpenAppend(log_path_));
  NVDRA_ASSIGN_OR_RETURN(file_id_, env_->Stat(log_path_));
  state_ = std::move(fresh);
  read_offset_ = data.size();
  meta_bytes_ = meta_bytes;
  return Status::Ok();
}

Status ClaimLedger::MaybeCompactLocked() {
  // Expired tombstones are dead bytes; dropping them lets compaction reclaim them.
  state_.DropExpiredTombstones(opts_.clock->Now(), opts_.tombstone_ttl, /*full_scan=*/false);
  uint64_t live = meta_bytes_ + state_.live_bytes() + state_.kept_bytes();
  uint64_t dead = read_offset_ > live ? read_offset_ - live : 0;
  if (static_cast<double>(dead) <=
      opts_.compaction_ratio * static_cast<double>(live) + static_cast<double>(opts_.compaction_min_bytes)) {
    return Status::Ok();
  }
  NVDRA_VLOG(4, "compacting claim ledger {}: {} dead bytes, {} live", log_path_, dead, live);
  return CompactLocked();
}

Status ClaimLedger::AppendLocked(const ClaimEntry& e, const char* before_fp, const char* after_fp) {
  NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT(before_fp));
  if (file_ == nullptr) return Unavailable("claim ledger " + log_path_ + " is not open");
  std::string rec = EncodeRecord(static_cast<uint8_t>(RecordType::kEntry), EntryToJson(e).dump());
  auto fail = [&](Status s) {
    // Cut a partial record off and re-read the file before the next transition.
    (void)file_->Truncate(read_offset_);
    file_.reset();
    file_id_ = FileIdentity();
    return s.Wrap("cannot record claim " + Describe(e) + " as " + ClaimStateName(e.state) +
                  " in " + log_path_);
  };
  // A torn write: half a record reaches the file before a crash.
  size_t half = rec.size() / 2;
  Status s = file_->Append(std::string_view(rec).substr(0, half));
  if (s.ok()) s = NVDRA_FAILPOINT("ledger-mid-append");
  if (s.ok()) s = file_->Append(std::string_view(rec).substr(half));
  if (s.ok()) s = file_->Sync();
  if (!s.ok()) return fail(s);
  read_offset_ += rec.size();
  file_id_.size = read_offset_;
  state_.Put(e, rec.size());
  NVDRA_VLOG(6, "claim ledger: {} -> {}", Describe(e), ClaimStateName(e.state));
  NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT(after_fp));
  return MaybeCompactLocked();
}

ClaimEntry ClaimLedger::Decorate(ClaimEntry e) const {
  e.from_earlier_boot = e.state != ClaimState::kTombstone && !boot_id_.empty() &&
                        e.boot_id != boot_id_;
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

// True when `now` names a consumer that `before` did not.
static bool HasNewConsumer(const std::vector<std::string>& before, const std::vector<std::string>& now) {
  for (const auto& c : now) {
    if (std::find(before.begin(), before.end(), c) == before.end()) return true;
  }
  return false;
}

Result<BeginResult> ClaimLedger::BeginPrepare(const BeginPrepareRequest& req) {
  NVDRA_RETURN_IF_ERROR(ValidateClaimUid(req.uid));
  std::vector<std::string> held = SortedUnique(req.held ? *req.held : DefaultHeld(req.allocation));
  return Locked([&]() -> Result<BeginResult> {
    const ClaimEntry* cur = FindLive(req.uid);
    if (cur != nullptr) {
      bool same = SameAllocation(cur->allocation, req.allocation);
      if (!same && cur->state != ClaimState::kTombstone) {
        return FailedPrecondition(fmt::format(
            "claim {} is already recorded as {} for a different allocation; refusing to "
            "overwrite it (unprepare the claim first)",
            Describe(*cur), ClaimStateName(cur->state)));
      }
      switch (cur->state) {
        case ClaimState::kPrepareCompleted: {
          BeginResult r{BeginOutcome::kAlreadyPrepared, Decorate(*cur)};
          if (r.entry.from_earlier_boot) r.outcome = BeginOutcome::kRedoAfterReboot;
          return r;
        }
        case ClaimState::kPrepareStarted:
          return BeginResult{BeginOutcome::kRetry, Decorate(*cur)};
        case ClaimState::kUnprepareStarted:
          return FailedPrecondition(fmt::format(
              "claim {} is being unprepared (UnprepareStarted); refusing to prepare it until "
              "the unprepare finishes",
              Describe(*cur)));
        case ClaimState::kTombstone:
          if (same && !HasNewConsumer(cur->consumers, req.consumers)) {
            auto left = std::chrono::duration_cast<std::chrono::seconds>(
                opts_.tombstone_ttl - (opts_.clock->Now() - cur->updated));
            return FailedPrecondition(fmt::format(
                "claim {} was unprepared recently; refusing a late Prepare of the same "
                "allocation, which would resurrect a claim the kubelet already released (the "
                "refusal expires in {}s)",
                Describe(*cur), left.count()));
          }
          break;  // a new allocation under the same UID starts afresh
      }
    }
    for (const auto& r : held) {
      const ClaimEntry* h = state_.HolderOf(r);
      if (h != nullptr && h->uid != req.uid) {
        return Conflict(fmt::format("{} already allocated by claim {} (according to checkpoint)",
                                    r, h->uid));
      }
    }
    ClaimEntry e;
    e.uid = req.uid;
    e.ns = req.ns;
    e.name = req.name;
    e.state = ClaimState::kPrepareStarted;
    e.allocation = req.allocation;
    e.held = held;
    e.consumers = SortedUnique(req.consumers);
    e.undo = req.undo;
    e.boot_id = boot_id_;
    e.updated = opts_.clock->Now();
    if (cur != nullptr) e.extra = cur->extra;
    NVDRA_RETURN_IF_ERROR(
        AppendLocked(e, "ledger-before-started-write", "ledger-after-started-write"));
    return BeginResult{BeginOutcome::kStarted, Decorate(e)};
  });
}

Status ClaimLedger::UpdateUndo(const std::string& uid, nlohmann::json undo) {
  return Locked([&]() -> Status {
    const ClaimEntry* cur = FindLive(uid);
    if (cur == nullptr || (cur->state != ClaimState::kPrepareStarted &&
                           cur->state != ClaimState::kPrepareCompleted)) {
      return FailedPrecondition(fmt::format(
          "cannot record undo data for claim {}: it is {}", uid,
          cur == nullptr ? "not in the ledger" : ClaimStateName(cur->state)));
    }
    ClaimEntry e = *cur;
    e.undo = std::move(undo);
    e.updated = opts_.clock->Now();
    return AppendLocked(e, "ledger-before-undo-write", "ledger-after-undo-write");
  });
}

Status ClaimLedger::CompletePrepare(const std::string& uid, std::vector<PreparedDevice> prepared,
                                    nlohmann::json undo) {
  return Locked([&]() -> Status {
    const ClaimEntry* cur = FindLive(uid);
    if (cur == nullptr || cur->state == ClaimState::kTombstone ||
        cur->state == ClaimState::kUnprepareStarted) {
      return FailedPrecondition(fmt::format(
          "cannot complete prepare of claim {}: it is {} (was it unprepared meanwhile?)", uid,
          cur == nullptr ? "not in the ledger" : ClaimStateName(cur->state)));
    }
    if (cur->state == ClaimState::kPrepareCompleted) {
      if (cur->prepared != prepared) {
        return FailedPrecondition(fmt::format(
            "claim {} was prepared with different devices before; a repeated prepare must "
            "return the recorded devices",
            Describe(*cur)));
      }
      if (boot_id_.empty() || cur->boot_id == boot_id_) return Status::Ok();  // idempotent
    }
    ClaimEntry e = *cur;
    e.state = ClaimState::kPrepareCompleted;
    e.prepared = std::move(prepared);
    if (!undo.is_null()) e.undo = std::move(undo);
    e.boot_id = boot_id_;
    e.updated = opts_.clock->Now();
    return AppendLocked(e, "ledger-before-completed-write", "ledger-after-completed-write");
  });
}

Result<std::optional<ClaimEntry>> ClaimLedger::BeginUnprepare(const std::string& uid) {
  return Locked([&]() -> Result<std::optional<ClaimEntry>> {
    const ClaimEntry* cur = FindLive(uid);
    if (cur == nullptr || cur->state == ClaimState::kTombstone) {
      return std::optional<ClaimEntry>();
    }
    if (cur->state == ClaimState::kUnprepareStarted) return std::optional(Decorate(*cur));
    ClaimEntry e = *cur;
    e.state = ClaimState::kUnprepareStarted;
    e.updated = opts_.clock->Now();
    NVDRA_RETURN_IF_ERROR(
        AppendLocked(e, "ledger-before-unprepare-write", "ledger-after-unprepare-write"));
    return std::optional(Decorate(e));
  });
}

Status ClaimLedger::FinishUnprepare(const std::string& uid) {
  return Locked([&]() -> Status {
    const ClaimEntry* cur = FindLive(uid);
    if (cur == nullptr || cur->state == ClaimState::kTombstone) return Status::Ok();
    if (cur->state != ClaimState::kUnprepareStarted) {
      return FailedPrecondition(fmt::format(
          "cannot finish unprepare of claim {}: it is {}, not UnprepareStarted", Describe(*cur),
          ClaimStateName(cur->state)));
    }
    ClaimEntry e;
    e.uid = cur->uid;
    e.ns = cur->ns;
    e.name = cur->name;
    e.state = ClaimState::kTombstone;
    e.allocation = cur->allocation;
    e.consumers = cur->consumers;
    e.extra = cur->extra;
    e.updated = opts_.clock->Now();
    return AppendLocked(e, "ledger-before-tombstone-write", "ledger-after-tombstone-write");
  });
}

Result<std::vector<ClaimEntry>> ClaimLedger::List() {
  return Locked([&]() -> Result<std::vector<ClaimEntry>> {
    std::vector<ClaimEntry> out;
    for (const auto& [uid, e] : state_.entries()) {
      if (FindLive(uid) != nullptr) out.push_back(Decorate(e));
    }
    return out;
  });
}

Result<std::optional<ClaimEntry>> ClaimLedger::Get(const std::string& uid) {
  return Locked([&]() -> Result<std::optional<ClaimEntry>> {
    const ClaimEntry* e = FindLive(uid);
    if (e == nullptr) return std::optional<ClaimEntry>();
    return std::optional(Decorate(*e));
  });
}

Result<std::optional<ClaimEntry>> ClaimLedger::HolderOf(const std::string& resource) {
  return Locked([&]() -> Result<std::optional<ClaimEntry>> {
    const ClaimEntry* e = state_.HolderOf(resource);
    if (e == nullptr) return std::optional<ClaimEntry>();
    return std::optional(Decorate(*e));
  });
}

Status ClaimLedger::CollectGarbage(bool force_compaction) {
  return Locked([&]() -> Status {
    size_t dropped = state_.DropExpiredTombstones(opts_.clock->Now(), opts_.tombstone_ttl);
    if (force_compaction) return CompactLocked();
    (void)dropped;
    return MaybeCompactLocked();
  });
}

OpenReport ClaimLedger::report() const {
  std::lock_guard<std::mutex> l(mu_);
  return report_;
}

}  // namespace nvdra::ledger
