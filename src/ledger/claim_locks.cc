#include "ledger/claim_locks.h"

namespace nvdra::ledger {

ClaimLocks::Guard ClaimLocks::Lock(const std::string& uid) {
  return std::move(*LockUntil(uid, std::chrono::steady_clock::time_point::max()));
}

std::optional<ClaimLocks::Guard> ClaimLocks::LockUntil(
    const std::string& uid, std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> l(mu_);
  Slot& s = slots_[uid];
  ++s.waiters;
  bool got = deadline == std::chrono::steady_clock::time_point::max()
                 ? (cv_.wait(l, [&] { return !slots_[uid].held; }), true)
                 : cv_.wait_until(l, deadline, [&] { return !slots_[uid].held; });
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
    std::lock_guard<std::mutex> l(mu_);
    auto it = slots_.find(uid);
    if (it == slots_.end()) return;
    it->second.held = false;
    if (it->second.waiters == 0) slots_.erase(it);
  }
  cv_.notify_all();
}

size_t ClaimLocks::tracked() const {
  std::lock_guard<std::mutex> l(mu_);
  return slots_.size();
}

}  // namespace nvdra::ledger
