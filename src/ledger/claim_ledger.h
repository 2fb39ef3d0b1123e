// ClaimLedger: the node-local durable record of every claim's state, one per
// driver in its plugin data directory. The claim engine brackets all device
// work with it: BeginPrepare (durable PrepareStarted before any device is
// touched), CompletePrepare, BeginUnprepare/FinishUnprepare. Every transition
// is one short critical section (in-process mutex + cross-process flock):
// catch up with records other processes appended, decide, append one record;
// then, outside the locks, wait until an fdatasync covers the record
// (concurrent transitions share one: group commit). See
// docs/ledger-format.md for the file format and the rules.
//
// One class, one concept per source file: opening and the transitions
// (claim_ledger.cc), the file and its appends (claim_ledger_files.cc), group
// commit (claim_ledger_group_commit.cc), compaction
// (claim_ledger_compaction.cc) and the reads (claim_ledger_queries.cc).
#pragma once

#include <array>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ledger/claim_entry.h"
#include "ledger/claim_transitions.h"
#include "ledger/kind_codec.h"
#include "ledger/ledger_env.h"
#include "ledger/ledger_holder_lock.h"
#include "ledger/ledger_state.h"
#include "ledger/legacy_checkpoint_migration.h"
#include "ledger/log_format.h"
#include "ledger/lost_claim_recovery.h"
#include "ledger/open_report.h"
#include "util/boot_id.h"
#include "util/clock.h"
#include "util/mutex.h"
#include "util/request_steps.h"
#include "util/status.h"

namespace nvdra::ledger {

inline constexpr const char* kLogFileName = "ledger.log";
inline constexpr const char* kLockFileName = "ledger.lock";

struct LedgerOptions {
  std::string dir;  // the driver's plugin data directory
  // The current boot; empty means read it from boot_id_path.
  std::string boot_id;
  std::string boot_id_path = kDefaultBootIdPath;
  const Clock* clock = &SystemClock::Get();
  // How long an unprepared claim refuses a late Prepare of the same allocation
  // (the plugins' --tombstone-ttl, default 300 s).
  std::chrono::nanoseconds tombstone_ttl = std::chrono::seconds(300);
  // How long a transition waits for another process holding the lock.
  std::chrono::nanoseconds lock_timeout = std::chrono::seconds(10);
  LedgerEnv* env = nullptr;  // nullptr: the real file system
  // The device kind's codec: its driver name filters allocation results when
  // importing the Go driver's checkpoint.json, and it names what their
  // devices hold. Not owned; nullptr: keep all results, held by device name.
  const KindCodec* codec = nullptr;
  // Import checkpoint.json when the directory has no ledger yet (under the
  // Go driver's pu.lock), then retire it (rename it aside).
  bool import_legacy_checkpoint = true;
  // Compact when dead bytes exceed compaction_ratio * live bytes + compaction_min_bytes,
  // where compaction_min_bytes is at most a 16th of the volume that holds
  // the ledger (a small tmpfs compacts long before it fills up).
  double compaction_ratio = 2.0;
  uint64_t compaction_min_bytes = 1 << 20;
  // Space kept in reserve beside the ledger (ledger.reserve), at most a
  // 16th of the volume: a transition that finds the volume full gives it up
  // to compact the ledger, retries, and takes it back. 0: no reserve.
  uint64_t reserve_bytes = 64 << 10;
};

// What the plugin's gauges show, kept as records are applied (the ledger's
// own and those caught up from another process), so reading it is O(1) in
// the number of entries.
struct LedgerCounts {
  std::array<int64_t, kClaimStateCount> claims{};  // entries by ClaimState
  // Devices returned by PrepareCompleted entries, by device type (see
  // SetDeviceClassifier; "" for a device it does not know), or by device
  // name while no classifier is set.
  std::unordered_map<std::string, int64_t> prepared_devices;
  uint64_t bytes = 0;  // size of ledger.log
};

struct BeginResult {
  BeginOutcome outcome = BeginOutcome::kStarted;
  ClaimEntry entry;  // the entry as recorded now
};

class ClaimLedger {
 public:
  // Opens or creates the ledger. Damage never fails Open: what verifies is
  // kept, the rest is quarantined and described in report(). Open fails only
  // when the directory itself cannot be used (permissions, I/O).
  static Result<std::unique_ptr<ClaimLedger>> Open(const LedgerOptions& options);

  ~ClaimLedger();
  ClaimLedger(const ClaimLedger&) = delete;
  ClaimLedger& operator=(const ClaimLedger&) = delete;

  // Errors: Conflict in the words of LedgerOptions::codec (KindCodec::
  // HeldByAnotherClaim; without one "<resource> already allocated by claim
  // <uid> (according to checkpoint)"); FailedPrecondition for a different allocation under the
  // same UID, an unprepare in progress, or a tombstoned (released) claim.
  Result<BeginResult> BeginPrepare(const BeginPrepareRequest& request);

  // Records PrepareCompleted with the devices returned to the kubelet. After a
  // reboot the devices must equal the recorded ones. Returns once the record
  // is appended, without waiting for its fdatasync: a crash of the process
  // loses nothing the kernel holds, the next transition's sync (or the
  // kernel's writeback, or the ledger's close) makes it durable, and a power
  // loss before that leaves the entry PrepareStarted of an earlier boot, which
  // is redone or released as any entry of an earlier boot is
  // (docs/ledger-format.md, "Durable writes on the prepare path"). `attempt` is the
  // BeginResult's entry.attempt: the completion is refused (FailedPrecondition)
  // when another BeginPrepare or an unprepare came in between. The claim
  // engine always passes it; nullopt (tools, tests) skips that check.
  Status CompletePrepare(const std::string& uid, std::vector<PreparedDevice> prepared, nlohmann::json undo,
                         std::optional<std::string> attempt = std::nullopt);

  // nullopt: unknown (or already unprepared) claim, nothing to do. Otherwise
  // the entry, now UnprepareStarted: undo the devices, then FinishUnprepare.
  Result<std::optional<ClaimEntry>> BeginUnprepare(const std::string& uid);

  // Replaces the entry by a tombstone that expires after tombstone_ttl.
  // Like CompletePrepare, returns once the record is appended: a power loss
  // before the next sync leaves the entry UnprepareStarted, which still
  // holds its devices and refuses a late Prepare until the reconciler
  // finishes the undo.
  Status FinishUnprepare(const std::string& uid);

  // Makes every record this process appended durable (one fdatasync when
  // one is pending). The destructor calls it.
  Status Flush();

  // A fresh view, including writes by other processes. Tombstones included.
  Result<std::vector<ClaimEntry>> List();
  // The entries that hold devices (every state but the tombstone): what a
  // kind asks of other claims on a claim's path, so its cost follows the
  // claims held, not the tombstones kept.
  Result<std::vector<ClaimEntry>> ListHeld();
  Result<std::optional<ClaimEntry>> Get(const std::string& uid);
  // The state of `uid`'s live entry (nullopt: none), without the
  // cross-process lock when the file shows no record appended by another
  // process since this one last read it (one stat); otherwise as Get. A
  // hint for a caller that decides again under the claim's locks: a record
  // another process appends right after the stat is not seen.
  Result<std::optional<ClaimState>> PeekState(const std::string& uid);
  // The live claim holding `resource` (for a Conflict: check that holder).
  Result<std::optional<ClaimEntry>> HolderOf(const std::string& resource);
  // Every live claim holding `resource` other than `except`, in record order
  // (several only for the shares of a device; see HeldShare).
  Result<std::vector<ClaimEntry>> HoldersOf(const std::string& resource, const std::string& except = "");

  // The counts as of the last transition or read of this process (records
  // other processes appended since are counted at the next one). Touches no
  // file and takes no cross-process lock: cheap enough for every request.
  LedgerCounts Counts() const;
  // How Counts() groups prepared devices (e.g. the device kind's type of a
  // device name), so that reading them costs the number of types, not of
  // devices or entries. Called with the mutex held, for every device of an
  // entry applied: must be cheap and must not call back into the ledger.
  // nullptr: by device name. Recounts the entries once.
  void SetDeviceClassifier(LedgerState::DeviceClassifier classify);

  // Drops expired tombstones (those written in clock order, amortized O(1)
  // each; a compaction drops every one) and compacts when dead bytes warrant
  // it (or always with force).
  Status CollectGarbage(bool force_compaction = false);

  // Records the namespace and name of a claim whose entry has none (imported
  // from an old Go checkpoint, or rebuilt), so the reconciler can look it up.
  // A recorded name is never replaced; writes nothing when there is one.
  Status AdoptName(const std::string& uid, const std::string& ns, const std::string& name);

  // Whether an unreadable ledger or checkpoint was set aside and not yet
  // recovered (see OpenReport::claims_may_be_missing). Fresh: another process
  // may have finished the recovery.
  Result<bool> ClaimsMayBeMissing();
  // Records a claim whose entry was lost as PrepareCompleted in this boot, with
  // undo {"rebuilt": {...}}. A no-op for a claim already live here; Conflict
  // when another live claim holds one of its resources. The next Prepare of
  // the claim adopts the allocation it brings and redoes the node work
  // (BeginOutcome::kRetry), so the answer to the kubelet is rebuilt exactly.
  Status RebuildEntry(const RebuiltClaim& claim);
  // Ends the recovery: the entries that could be rebuilt are; from now on
  // the ledger is the truth again and orphan CDI specs may be swept.
  Status FinishRecovery();

  OpenReport report() const;
  const std::string& boot_id() const { return boot_id_; }
  const std::string& dir() const { return opts_.dir; }
  // LedgerOptions::codec: it words the refusals of held resources.
  const KindCodec* codec() const { return opts_.codec; }
  std::string log_path() const;

 private:
  explicit ClaimLedger(const LedgerOptions& options);

  // Runs `fn` under mu_ and the cross-process lock, after catching up with
  // the file; `fn` is a lambda annotated REQUIRES(mu_). When `fn` appended
  // records, returns once they are durable (group commit, below), after
  // both locks are released; with kAppended, once they are appended.
  // `step`: what a timed request (util/request_steps.h) is doing meanwhile;
  // the wait for the sync counts as that transition's fdatasync step.
  enum class Ack { kDurable, kAppended };
  template <typename F>
  auto Locked(F&& fn, RequestStep step = RequestStep::kLedgerRead, Ack ack = Ack::kDurable) -> decltype(fn());

  // Group commit. Records are appended under the locks; their fdatasync runs
  // after the locks are released, so the transitions of other threads append
  // meanwhile. The first waiter whose record is not durable yet leads: it
  // syncs everything appended so far, once, for all waiters; the others
  // wait for it. `seq` numbers this process's records in append order.
  Status WaitDurable(uint64_t seq) EXCLUDES(mu_);
  // A sync failed (or no file is open to sync): every record not durable
  // yet fails. Our own records after the last durable byte (and after any
  // other process's record) are cut off when nobody appended after them.
  void FailPendingLocked(const Status& why) REQUIRES(mu_);
  // The file was replaced or reopened: `synced` says whether everything
  // appended so far is durable in it (a compaction's synced rewrite);
  // otherwise the pending records are synced now.
  void FileReopenedLocked(bool synced) REQUIRES(mu_);
  bool FailedLocked(uint64_t seq, Status* why) const REQUIRES(mu_);

  Status CatchUpLocked() REQUIRES(mu_);
  // `bytes` hold the file from offset `base`; the last record starts at `offset`.
  void NoteLastRecordLocked(std::string_view bytes, uint64_t base, uint64_t offset) REQUIRES(mu_);
  // Re-reads the whole file (or creates it); see docs/ledger-format.md, "Recovery (opening)".
  Status ReloadLocked() REQUIRES(mu_);
  Status CreateWithImportLocked() REQUIRES(mu_);
  // A file whose header cannot be used is set aside: true, with `*status`
  // saying whether that worked.
  bool SetAsideIfUnreadableLocked(DecodedLog& log, const std::string& bytes, std::vector<DamagedRange>& damage,
                                  Status* status) REQUIRES(mu_);
  void ApplyLogLocked(const DecodedLog& log) REQUIRES(mu_);
  Status RepairDamageLocked(const std::string& bytes, const DecodedLog& log, const std::vector<DamagedRange>& damage,
                            const FileIdentity& id, uint64_t meta_bytes) REQUIRES(mu_);
  Status SetAsideUnreadableLocked(const std::string& kind, const std::string& why) REQUIRES(mu_);
  Status ClearTempPathLocked() REQUIRES(mu_);
  Status CompactLocked() REQUIRES(mu_);
  Status MaybeCompactLocked() REQUIRES(mu_);
  // Writes ledger.reserve when it is missing or of another size (best
  // effort: a volume too full for it runs without).
  void EnsureReserveLocked() REQUIRES(mu_);
  std::string ReservePath() const;
  Status OpenExistingForAppendLocked(const FileIdentity& id, uint64_t size, uint64_t meta_bytes) REQUIRES(mu_);
  void RefreshReportLocked() REQUIRES(mu_);
  // What the pure transitions (claim_transitions.h) see: this boot, the
  // clock, and what the other live entries hold.
  TransitionContext ContextLocked() const REQUIRES(mu_);
  // Appends t.entry when the transition wrote one, and moves it into the
  // state (t.entry is left empty; the state's entry is the claim's now).
  Status RecordLocked(Transition& t, const char* before_fp, const char* after_fp) REQUIRES(mu_);
  Status AppendLocked(ClaimEntry e, const char* before_fp, const char* after_fp) REQUIRES(mu_);
  Status QuarantineLocked(const std::string& bytes, const std::vector<DamagedRange>& damage) REQUIRES(mu_);
  ClaimEntry Decorate(ClaimEntry e) const REQUIRES(mu_);
  LedgerState NewStateLocked() const REQUIRES(mu_);
  // Expired tombstones hidden.
  const ClaimEntry* FindLive(const std::string& uid) const REQUIRES(mu_);
  std::string SidePath(const std::string& kind) const;

  LedgerOptions opts_;
  LedgerEnv* env_;
  std::string boot_id_;
  std::string log_path_, lock_path_;

  mutable Mutex mu_;  // guards everything below
  LedgerState state_ GUARDED_BY(mu_);
  LedgerState::DeviceClassifier classify_ GUARDED_BY(mu_);
  // Shared with a sync in flight, which runs without mu_ while a compaction
  // may replace the file.
  std::shared_ptr<AppendFile> file_ GUARDED_BY(mu_);
  FileIdentity file_id_ GUARDED_BY(mu_);
  // Bytes of the log consumed == its size after a catch-up.
  uint64_t read_offset_ GUARDED_BY(mu_) = 0;
  // Where the last record we read or wrote starts, and its header (CRC and
  // length). A catch-up checks that it is still there: another process that
  // cut records off after a failed sync may have appended as many bytes again,
  // and inode and size alone would not tell.
  uint64_t last_record_offset_ GUARDED_BY(mu_) = 0;
  std::string last_record_head_ GUARDED_BY(mu_);
  uint64_t meta_bytes_ GUARDED_BY(mu_) = 0;  // header + meta record of the current file
  // compaction_min_bytes and reserve_bytes as the volume allows (see LedgerOptions).
  uint64_t compaction_min_bytes_ = 0;
  uint64_t reserve_bytes_ = 0;
  OpenReport report_ GUARDED_BY(mu_);
  bool opened_ GUARDED_BY(mu_) = false;
  // Held for the ledger's lifetime: says a process has this ledger open.
  std::unique_ptr<LedgerHolderLock> holder_ GUARDED_BY(mu_);
  // The Go driver's checkpoint.json; nullptr when its import is off.
  std::unique_ptr<LegacyCheckpointMigration> legacy_ GUARDED_BY(mu_);
  // Group commit (see WaitDurable).
  uint64_t appended_seq_ GUARDED_BY(mu_) = 0;    // last record appended by this process
  uint64_t durable_seq_ GUARDED_BY(mu_) = 0;     // every record up to here is durable
  uint64_t durable_offset_ GUARDED_BY(mu_) = 0;  // file bytes known durable
  // Bytes before this offset are durable or another process's: a failed
  // sync may cut the file back to here, never further.
  uint64_t truncate_floor_ GUARDED_BY(mu_) = 0;
  bool syncing_ GUARDED_BY(mu_) = false;
  bool flock_held_ GUARDED_BY(mu_) = false;  // this thread holds the cross-process lock
  CondVar synced_cv_;
  struct FailedRange {
    uint64_t from, to;  // sequence numbers, inclusive
    Status why;
  };
  std::vector<FailedRange> failed_ GUARDED_BY(mu_);  // the latest few
  // Set by AppendLocked for the Locked call running on this thread.
  uint64_t commit_seq_ GUARDED_BY(mu_) = 0;
  std::string commit_what_ GUARDED_BY(mu_);
};

}  // namespace nvdra::ledger
