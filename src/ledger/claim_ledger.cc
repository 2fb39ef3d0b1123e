// ClaimLedger: opening the ledger and the transitions (BeginPrepare ..
// FinishUnprepare, name adoption, the lost-claim rebuild). The files and
// appends are in claim_ledger_files.cc, group commit in
// claim_ledger_group_commit.cc, compaction in claim_ledger_compaction.cc,
// reads in claim_ledger_queries.cc.
#include "ledger/claim_ledger.h"

#include <algorithm>
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

Status ClaimLedger::RecordLocked(const Transition& t, const char* before_fp, const char* after_fp) {
  if (!t.write || !t.entry) return Status::Ok();
  return AppendLocked(*t.entry, before_fp, after_fp);
}

Result<BeginResult> ClaimLedger::BeginPrepare(const BeginPrepareRequest& req) {
  NVDRA_RETURN_IF_ERROR(ValidateClaimUid(req.uid));
  return Locked(
      [&]() REQUIRES(mu_) -> Result<BeginResult> {
        TransitionContext ctx = ContextLocked();
        // An entry imported from an old checkpoint, or rebuilt, has no name:
        // take it from the first Prepare, so the reconciler can check the claim.
        NVDRA_RETURN_IF_ERROR(RecordLocked(transition::AdoptName(FindLive(req.uid), req.ns, req.name, ctx),
                                           "ledger-before-name-write", "ledger-after-name-write"));
        ctx.new_attempt = NewAttempt();
        NVDRA_ASSIGN_OR_RETURN(Transition t, transition::BeginPrepare(FindLive(req.uid), req, ctx));
        NVDRA_RETURN_IF_ERROR(RecordLocked(t, "ledger-before-started-write", "ledger-after-started-write"));
        return BeginResult{t.outcome, Decorate(std::move(*t.entry))};
      },
      RequestStep::kAppendStarted);
}

Status ClaimLedger::AdoptName(const std::string& uid, const std::string& ns, const std::string& name) {
  if (name.empty()) return Status::Ok();
  return Locked([&]() REQUIRES(mu_) -> Status {
    return RecordLocked(transition::AdoptName(FindLive(uid), ns, name, ContextLocked()), "ledger-before-name-write",
                        "ledger-after-name-write");
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
        NVDRA_RETURN_IF_ERROR(RecordLocked(t, "ledger-before-unprepare-write", "ledger-after-unprepare-write"));
        if (!t.entry) return std::optional<ClaimEntry>();
        return std::optional(Decorate(std::move(*t.entry)));
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
        NVDRA_VLOG(6, "Deleted claim from checkpoint: {}/{} (claim {})", t.entry->ns, t.entry->name, t.entry->uid);
        return Status::Ok();
      },
      RequestStep::kAppendFinal, Ack::kAppended);
}

}  // namespace nvdra::ledger
