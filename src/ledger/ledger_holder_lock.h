// Says that a process has a directory's ledger open: each ClaimLedger holds a
// shared flock on `holders.lock` for as long as it lives, so any number of
// plugin processes (a rolling update) and `nvdractl ledger rebuild` hold it
// together, while a tool that must not run beside a plugin (retiring the
// ledger for a rollback to the Go driver) takes it exclusively, without
// waiting, and refuses when it cannot. The kernel releases the lock of a
// process that dies, so a crashed plugin never blocks a rollback.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "util/status.h"

namespace nvdra::ledger {

inline constexpr const char* kHolderLockFileName = "holders.lock";

class LedgerHolderLock {
 public:
  ~LedgerHolderLock();
  LedgerHolderLock(const LedgerHolderLock&) = delete;
  LedgerHolderLock& operator=(const LedgerHolderLock&) = delete;

  // The shared hold of an open ledger; waits until `deadline` while a tool
  // holds it exclusively.
  static Result<std::unique_ptr<LedgerHolderLock>> HoldShared(const std::string& dir,
                                                              std::chrono::steady_clock::time_point deadline);
  // The exclusive hold, or FailedPrecondition naming the directory when a
  // process has its ledger open.
  static Result<std::unique_ptr<LedgerHolderLock>> TryExclusive(const std::string& dir);

 private:
  explicit LedgerHolderLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace nvdra::ledger
