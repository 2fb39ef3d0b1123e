// Per-claim in-process exclusion for the claim engine: two gRPC calls for the
// same claim UID run one after the other, while calls for different claims run
// their device work in parallel. (The ledger's own lock only covers the short
// read-check-append of one transition.) Entries exist only while a claim is
// locked or awaited, so the table never grows with the number of claims seen.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <unordered_map>

#include "util/mutex.h"

namespace nvdra::ledger {

class ClaimLocks {
 public:
  class Guard {
   public:
    Guard(Guard&& o) noexcept : locks_(o.locks_), uid_(std::move(o.uid_)) { o.locks_ = nullptr; }
    Guard& operator=(Guard&&) = delete;
    ~Guard() {
      if (locks_ != nullptr) locks_->Unlock(uid_);
    }

   private:
    friend class ClaimLocks;
    Guard(ClaimLocks* l, std::string uid) : locks_(l), uid_(std::move(uid)) {}
    ClaimLocks* locks_;
    std::string uid_;
  };

  Guard Lock(const std::string& uid) EXCLUDES(mu_);
  // nullopt when the claim is still locked at `deadline`.
  std::optional<Guard> LockUntil(const std::string& uid, std::chrono::steady_clock::time_point deadline) EXCLUDES(mu_);
  // Claims currently locked or awaited.
  size_t tracked() const EXCLUDES(mu_);

 private:
  struct Slot {
    bool held = false;
    int waiters = 0;
  };
  void Unlock(const std::string& uid) EXCLUDES(mu_);

  mutable Mutex mu_;
  CondVar cv_;
  std::unordered_map<std::string, Slot> slots_ GUARDED_BY(mu_);
};

}  // namespace nvdra::ledger
