#include "ledger/claim_operation_lock.h"

#include <fcntl.h>
#include <unistd.h>

#include "ledger/lock_wait.h"
#include "util/file_util.h"

namespace nvdra::ledger {
namespace {

struct flock RangeOf(uint64_t offset, short type) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = static_cast<off_t>(offset);
  fl.l_len = 1;
  fl.l_pid = 0;  // required by F_OFD_* locks
  return fl;
}

}  // namespace

ClaimOperationLock::~ClaimOperationLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the description releases its lock
}

ClaimOperationLocks::ClaimOperationLocks(std::string dir) : path_(JoinPath(dir, kClaimLockFileName)) {}

uint64_t ClaimOperationLocks::OffsetOf(const std::string& claim_uid) {
  // FNV-1a, then a finaliser that spreads the bits; kept below 2^62 so the
  // offset is a valid off_t with room for the one-byte range.
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : claim_uid) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h & ((1ULL << 62) - 1);
}

Result<int> ClaimOperationLocks::OpenFile() const {
  int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    int err = errno;
    return Unavailable("cannot open the claim lock file " + path_ + ": " + ErrnoText(err));
  }
  return fd;
}

Result<std::optional<ClaimOperationLock>> ClaimOperationLocks::TryAcquire(const std::string& claim_uid) const {
  NVDRA_ASSIGN_OR_RETURN(int fd, OpenFile());
  struct flock fl = RangeOf(OffsetOf(claim_uid), F_WRLCK);
  if (::fcntl(fd, F_OFD_SETLK, &fl) == 0) return std::optional<ClaimOperationLock>(ClaimOperationLock(fd));
  int err = errno;
  ::close(fd);
  if (err == EAGAIN || err == EACCES) return std::optional<ClaimOperationLock>();
  return Unavailable("cannot lock claim " + claim_uid + " in " + path_ + ": " + ErrnoText(err));
}

Result<ClaimOperationLock> ClaimOperationLocks::Acquire(const std::string& claim_uid,
                                                        std::chrono::steady_clock::time_point deadline) const {
  NVDRA_ASSIGN_OR_RETURN(std::optional<ClaimOperationLock> now, TryAcquire(claim_uid));
  if (now) return std::move(*now);
  NVDRA_ASSIGN_OR_RETURN(int fd, OpenFile());
  uint64_t offset = OffsetOf(claim_uid);
  LockWaitResult waited = WaitForLock(
      fd,
      [offset](int f) {
        struct flock fl = RangeOf(offset, F_WRLCK);
        return ::fcntl(f, F_OFD_SETLKW, &fl);
      },
      deadline);
  if (waited.outcome == LockWaitOutcome::kTimedOut) {
    return DeadlineExceeded("another operation on claim " + claim_uid +
                            " is still running (in this or another plugin process); the kubelet will retry");
  }
  if (waited.outcome == LockWaitOutcome::kFailed) {
    ::close(fd);
    return Unavailable("cannot lock claim " + claim_uid + " in " + path_ + ": " + ErrnoText(waited.err));
  }
  return ClaimOperationLock(fd);
}

}  // namespace nvdra::ledger
