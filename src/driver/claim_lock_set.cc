#include "driver/claim_lock_set.h"

#include <utility>

#include "util/request_steps.h"

namespace nvdra::driver {

Result<ClaimLock> ClaimLockSet::Lock(const std::string& uid, std::chrono::steady_clock::time_point deadline) {
  TimedStep step(RequestStep::kClaimLock);
  auto in_process = locks_.LockUntil(uid, deadline);
  if (!in_process) {
    return DeadlineExceeded("another operation on this claim is still running; the kubelet will retry");
  }
  NVDRA_ASSIGN_OR_RETURN(ledger::ClaimOperationLock across, op_locks_.Acquire(uid, deadline));
  return ClaimLock{std::move(*in_process), std::move(across)};
}

Result<std::optional<ClaimLock>> ClaimLockSet::LockIfIdle(const std::string& uid) {
  auto in_process = locks_.Lock(uid);
  NVDRA_ASSIGN_OR_RETURN(std::optional<ledger::ClaimOperationLock> across, op_locks_.TryAcquire(uid));
  if (!across) return std::optional<ClaimLock>();
  return std::optional<ClaimLock>(ClaimLock{std::move(in_process), std::move(*across)});
}

}  // namespace nvdra::driver
