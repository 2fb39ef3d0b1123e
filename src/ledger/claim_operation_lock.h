// Cross-process exclusion of a whole operation on one claim: a prepare from
// its ledger check through the device work, the CDI write and
// CompletePrepare; an unprepare from BeginUnprepare to its tombstone; the
// orphan sweep's check-and-delete of a claim's CDI spec. The ledger's own lock
// covers one transition's read-check-append only; this one spans the device
// work between transitions, so two plugin processes on one state directory
// (an upgrade's old and new pod) never interleave their work on one claim,
// while different claims proceed in parallel.
//
// Mechanism: one lock file, `claims.lock` in the ledger directory, and an
// open-file-description byte-range lock (F_OFD_SETLK) of one byte at an offset
// derived from the claim UID. Each acquisition opens its own file description,
// so two acquisitions conflict whether they come from two processes or two
// threads of one process; the kernel drops the lock of a process that dies.
// A blocking lock cannot be given a timeout, so a helper thread blocks in it
// while the caller waits until its deadline (no polling); an abandoned helper
// releases the lock as soon as it gets it. See docs/ledger-format.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "util/status.h"

namespace nvdra::ledger {

inline constexpr const char* kClaimLockFileName = "claims.lock";

class ClaimOperationLock {
 public:
  ClaimOperationLock(ClaimOperationLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  ClaimOperationLock& operator=(ClaimOperationLock&&) = delete;
  ClaimOperationLock(const ClaimOperationLock&) = delete;
  ~ClaimOperationLock();

 private:
  friend class ClaimOperationLocks;
  explicit ClaimOperationLock(int fd) : fd_(fd) {}
  int fd_;
};

class ClaimOperationLocks {
 public:
  // `dir`: the ledger directory (created by the ledger). The lock file is
  // created on first use.
  explicit ClaimOperationLocks(std::string dir);

  // Waits until `deadline` for the claim's lock. DeadlineExceeded (retryable)
  // when another operation on the claim still holds it then.
  Result<ClaimOperationLock> Acquire(const std::string& claim_uid,
                                     std::chrono::steady_clock::time_point deadline) const;
  // nullopt when another operation holds the claim's lock right now.
  Result<std::optional<ClaimOperationLock>> TryAcquire(const std::string& claim_uid) const;

  // The byte locked for a claim: a 62-bit hash of its UID. Two UIDs sharing a
  // byte would only serialise, never break exclusion.
  static uint64_t OffsetOf(const std::string& claim_uid);

  const std::string& path() const { return path_; }

 private:
  Result<int> OpenFile() const;

  std::string path_;
};

}  // namespace nvdra::ledger
