// ClaimLedger: opening the ledger and the transitions (BeginPrepare ..
// FinishUnprepare, name adoption, the lost-claim rebuild). The files and
// appends are in claim_ledger_files.cc, group commit in
// claim_ledger_group_commit.cc, compaction in claim_ledger_compaction.cc,
// reads in claim_ledger_queries.cc.
#include "ledger/claim_ledger.h"

#include <sys/random.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <random>
#include <utility>

#include <fmt/format.h>

#include "ledger/claim_ledger_locked.h"
#include "util/file_util.h"
#include "util/log.h"
#include "util/uid.h"

namespace nvdra::ledger {
namespace {

// A fresh name for one BeginPrepare: unique across processes and restarts
// with overwhelming probability. 128 bits from the kernel in one call.
std::string NewAttempt() {
  unsigned char bytes[16];
  if (getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
    static std::mutex mu;
    static std::random_device device;
    std::lock_guard<std::mutex> l(mu);
    for (size_t i = 0; i < sizeof bytes; i += 4) {
      uint32_t v = device();
      std::memcpy(bytes + i, &v, 4);
    }
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(2 * sizeof bytes, '0');
  for (size_t i = 0; i < sizeof bytes; ++i) {
    out[2 * i] = kHex[bytes[i] >> 4];
    out[2 * i + 1] = kHex[bytes[i] & 0xF];
  }
  return out;
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

TransitionContext ClaimLedger::ContextLocked() const {
  TransitionContext ctx;
  ctx.boot_id = boot_id_;
  ctx.now = opts_.clock->Now();
  ctx.tombstone_ttl = opts_.tombstone_ttl;
  ctx.codec = opts_.codec;
  // Called by the transition, which runs under mu_ (see Locked).
  ctx.other_holder = [this](const std::string& resource, const std::string& except)
                         NO_THREAD_SAFETY_ANALYSIS -> std::optional<std::string> {
    auto holders = state_.HoldersOf(resource, except);
    if (holders.empty()) return std::nullopt;
    return holders.front()->uid;
  };
  ctx.other_holders =
      [this](const std::string& resource, const std::string& except)
          NO_THREAD_SAFETY_ANALYSIS -> std::vector<const ClaimEntry*> { return state_.HoldersOf(resource, except); };
  return ctx;
}

Status ClaimLedger::RecordLocked(Transition& t, const char* before_fp, const char* after_fp) {
  if (!t.write || !t.entry) return Status::Ok();
  ClaimEntry e = std::move(*t.entry);
  t.entry.reset();
  return AppendLocked(std::move(e), before_fp, after_fp);
}

Result<BeginResult> ClaimLedger::BeginPrepare(const BeginPrepareRequest& req) {
  NVDRA_RETURN_IF_ERROR(ValidateClaimUid(req.uid));
  return Locked(
      [&]() REQUIRES(mu_) -> Result<BeginResult> {
        TransitionContext ctx = ContextLocked();
        // An entry imported from an old checkpoint, or rebuilt, has no name:
        // take it from the first Prepare, so the reconciler can check the claim.
        Transition named = transition::AdoptName(FindLive(req.uid), req.ns, req.name, ctx);
        NVDRA_RETURN_IF_ERROR(RecordLocked(named, "ledger-before-name-write", "ledger-after-name-write"));
        ctx.new_attempt = NewAttempt();
        NVDRA_ASSIGN_OR_RETURN(Transition t, transition::BeginPrepare(FindLive(req.uid), req, ctx));
        if (!t.write) return BeginResult{t.outcome, Decorate(std::move(*t.entry))};
        NVDRA_RETURN_IF_ERROR(RecordLocked(t, "ledger-before-started-write", "ledger-after-started-write"));
        return BeginResult{t.outcome, Decorate(*state_.Find(req.uid))};
      },
      RequestStep::kAppendStarted);
}

Status ClaimLedger::AdoptName(const std::string& uid, const std::string& ns, const std::string& name) {
  if (name.empty()) return Status::Ok();
  return Locked([&]() REQUIRES(mu_) -> Status {
    Transition t = transition::AdoptName(FindLive(uid), ns, name, ContextLocked());
    return RecordLocked(t, "ledger-before-name-write", "ledger-after-name-write");
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

Status ClaimLedger::CompletePrepare(const std::string& uid, std::vector<PreparedDevice> prepared, nlohmann::json undo,
                                    std::optional<std::string> attempt) {
  return Locked(
      [&]() REQUIRES(mu_) -> Status {
        NVDRA_ASSIGN_OR_RETURN(Transition t, transition::CompletePrepare(FindLive(uid), uid, std::move(prepared),
                                                                         std::move(undo), attempt, ContextLocked()));
        return RecordLocked(t, "ledger-before-completed-write", "ledger-after-completed-write");
      },
      RequestStep::kAppendFinal, Ack::kAppended);
}

Result<std::optional<ClaimEntry>> ClaimLedger::BeginUnprepare(const std::string& uid) {
  return Locked(
      [&]() REQUIRES(mu_) -> Result<std::optional<ClaimEntry>> {
        NVDRA_ASSIGN_OR_RETURN(Transition t, transition::BeginUnprepare(FindLive(uid), ContextLocked()));
        if (!t.entry) return std::optional<ClaimEntry>();
        if (!t.write) return std::optional(Decorate(std::move(*t.entry)));
        NVDRA_RETURN_IF_ERROR(RecordLocked(t, "ledger-before-unprepare-write", "ledger-after-unprepare-write"));
        return std::optional(Decorate(*state_.Find(uid)));
      },
      RequestStep::kAppendStarted);
}

Status ClaimLedger::FinishUnprepare(const std::string& uid) {
  return Locked(
      [&]() REQUIRES(mu_) -> Status {
        NVDRA_ASSIGN_OR_RETURN(Transition t, transition::FinishUnprepare(FindLive(uid), ContextLocked()));
        if (!t.write) return Status::Ok();
        NVDRA_RETURN_IF_ERROR(RecordLocked(t, "ledger-before-tombstone-write", "ledger-after-tombstone-write"));
        // Upstream's words, which operators grep for.
        // (A tombstone_ttl of 0 lets the append's garbage collection drop it at once.)
        if (const ClaimEntry* e = state_.Find(uid)) {
          NVDRA_VLOG(6, "Deleted claim from checkpoint: {}/{} (claim {})", e->ns, e->name, e->uid);
        }
        return Status::Ok();
      },
      RequestStep::kAppendFinal, Ack::kAppended);
}

}  // namespace nvdra::ledger
