#include "ledger/claim_locks.h"

namespace nvdra::ledger {

ClaimLocks::Guard ClaimLocks::Lock(const std::string& uid) {
  return std::move(*LockUntil(uid, std::chrono::steady_clock::time_point::max()));
}

std::optional<ClaimLocks::Guard> ClaimLocks::LockUntil(const std::string& uid,
                                                       std::chrono::steady_clock::time_point deadline) {
  MutexLock l(mu_);
  Slot& s = slots_[uid];
  ++s.waiters;
  auto released = [&]() REQUIRES(mu_) { return !slots_[uid].held; };
  bool got = deadline == std::chrono::steady_clock::time_point::max() ? (cv_.Wait(mu_, released), true)
                                                                      : cv_.WaitUntil(mu_, deadline, released);
  Slot& slot = slots_[uid];  // rehashing may have moved it
  --slot.waiters;
  if (!got) {
    if (!slot.held && slot.waiters == 0) slots_.erase(uid);
    return std::nullopt;
  }
  slot.held = true;
  return Guard(this, uid);
}

void ClaimLocks::Unlock(const std::string& uid) {
  {
    MutexLock l(mu_);
    auto it = slots_.find(uid);
    if (it == slots_.end()) return;
    it->second.held = false;
    if (it->second.waiters == 0) slots_.erase(it);
  }
  cv_.NotifyAll();
}

size_t ClaimLocks::tracked() const {
  MutexLock l(mu_);
  return slots_.size();
}

}  // namespace nvdra::ledger
