// The per-claim locks of the claim engine and its collaborators (metadata,
// sweeps, recovery), and the one order in which every lock of the plugin is
// taken:
//
//   1. the claim's in-process lock (ledger::ClaimLocks): work on one claim
//      UID inside this process runs one at a time;
//   2. the claim's cross-process lock (ledger::ClaimOperationLocks, a file
//      lock beside the ledger): the same across plugin processes on one
//      state directory;
//   3. the ledger's mutex, then the ledger's file lock: taken inside each
//      ClaimLedger call and released before it returns, so a caller never
//      holds them while it takes 1 or 2.
//
// Locks 1 and 2 are taken together (Lock) or not at all. A Prepare takes
// them once, for the ledger check, the device work, the CDI write and the
// completion; the kind's readiness wait releases them and takes them again
// (see Engine::AwaitWithoutLocks). While one claim's locks are held, another
// claim's are only taken with a bounded wait (a stale holder released for a
// conflicting claim), so two claims that wait for each other time out
// instead of deadlocking. The CDI writer, the metadata files and the kind
// take no lock of this list.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "ledger/claim_locks.h"
#include "ledger/claim_operation_lock.h"
#include "util/status.h"

namespace nvdra::driver {

// A claim's locks 1 and 2, released in the reverse order.
struct ClaimLock {
  ledger::ClaimLocks::Guard in_process;
  ledger::ClaimOperationLock across;
};

class ClaimLockSet {
 public:
  // `ledger_dir`: where the cross-process lock files live.
  explicit ClaimLockSet(const std::string& ledger_dir) : op_locks_(ledger_dir) {}

  // Both locks of `uid`, waiting until `deadline`. DeadlineExceeded when
  // another operation on the claim still runs then.
  Result<ClaimLock> Lock(const std::string& uid, std::chrono::steady_clock::time_point deadline);
  // For a sweep's check-and-delete: the in-process lock (waited for), then
  // the cross-process one only if it is free now. nullopt: another process
  // works on the claim, so it is no orphan now.
  Result<std::optional<ClaimLock>> LockIfIdle(const std::string& uid);

 private:
  ledger::ClaimLocks locks_;
  ledger::ClaimOperationLocks op_locks_;
};

}  // namespace nvdra::driver
