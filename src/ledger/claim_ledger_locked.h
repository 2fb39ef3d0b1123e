// ClaimLedger::Locked, the critical section every transition and read runs
// in: shared by the ledger's source files (claim_ledger*.cc) only.
#pragma once

#include <chrono>
#include <optional>
#include <utility>

#include "ledger/claim_ledger.h"

namespace nvdra::ledger {

template <typename F>
auto ClaimLedger::Locked(F&& fn, RequestStep step, Ack ack) -> decltype(fn()) {
  std::optional<decltype(fn())> result;
  uint64_t seq = 0;
  std::string what;
  {
    TimedStep critical(step);
    MutexLock guard(mu_);
    auto lock = env_->Lock(lock_path_,
                           std::chrono::steady_clock::now() +
                               std::chrono::duration_cast<std::chrono::steady_clock::duration>(opts_.lock_timeout));
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

}  // namespace nvdra::ledger
