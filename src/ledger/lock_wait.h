// Waiting for a blocking file lock (flock, an F_OFD_SETLKW range) no longer
// than a deadline. The kernel's blocking lock calls cannot be given a
// timeout, so the call runs on a detached thread and the caller stops
// waiting for it at the deadline; the thread then closes the descriptor when
// the call returns, which releases a lock it got too late.
#pragma once

#include <chrono>
#include <functional>

namespace nvdra::ledger {

enum class LockWaitOutcome {
  kLocked,    // the descriptor holds the lock and is still the caller's
  kFailed,    // the lock call failed (err); the descriptor is still the caller's
  kTimedOut,  // the deadline passed; the descriptor is no longer the caller's
};

struct LockWaitResult {
  LockWaitOutcome outcome = LockWaitOutcome::kFailed;
  int err = 0;  // errno of the failed lock call
};

// `lock_call(fd)` is the blocking call: 0 once locked, -1 with errno set
// otherwise. It is repeated when a signal interrupts it (EINTR).
LockWaitResult WaitForLock(int fd, std::function<int(int fd)> lock_call,
                           std::chrono::steady_clock::time_point deadline);

}  // namespace nvdra::ledger
