// ClaimLedger's group commit: records are appended under the locks and made
// durable after them, one fdatasync for every waiter (see WaitDurable), and
// what a failed sync does to the records it did not cover.
#include <algorithm>
#include <chrono>
#include <memory>

#include "ledger/claim_ledger.h"

namespace nvdra::ledger {

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
      auto lock = env_->Lock(lock_path_,
                             std::chrono::steady_clock::now() +
                                 std::chrono::duration_cast<std::chrono::steady_clock::duration>(opts_.lock_timeout));
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
      lock = env_->Lock(lock_path_,
                        std::chrono::steady_clock::now() +
                            std::chrono::duration_cast<std::chrono::steady_clock::duration>(opts_.lock_timeout));
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

}  // namespace nvdra::ledger
