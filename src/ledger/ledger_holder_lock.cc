#include "ledger/ledger_holder_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "ledger/lock_wait.h"
#include "util/file_util.h"

namespace nvdra::ledger {
namespace {

Status IoError(const std::string& what, const std::string& path, int err) {
  StatusCode code = err == EACCES || err == EPERM ? StatusCode::kPermissionDenied : StatusCode::kUnavailable;
  return Status(code, what + " " + path + ": " + ErrnoText(err));
}

Result<int> OpenLockFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return IoError("cannot open lock file", path, errno);
  return fd;
}

}  // namespace

LedgerHolderLock::~LedgerHolderLock() { ::close(fd_); }  // closing the description releases its lock

Result<std::unique_ptr<LedgerHolderLock>> LedgerHolderLock::HoldShared(const std::string& dir,
                                                                       std::chrono::steady_clock::time_point deadline) {
  const std::string path = JoinPath(dir, kHolderLockFileName);
  NVDRA_ASSIGN_OR_RETURN(int fd, OpenLockFile(path));
  if (::flock(fd, LOCK_SH | LOCK_NB) == 0) return std::unique_ptr<LedgerHolderLock>(new LedgerHolderLock(fd));
  if (errno != EWOULDBLOCK) {
    int err = errno;
    ::close(fd);
    return IoError("cannot lock", path, err);
  }
  LockWaitResult waited = WaitForLock(
      fd, [](int f) { return ::flock(f, LOCK_SH); }, deadline);
  if (waited.outcome == LockWaitOutcome::kTimedOut) {
    return Unavailable("timed out waiting for " + path +
                       ": a tool holds it exclusively (is `nvdractl ledger export-upstream --retire-ledger` "
                       "running?)");
  }
  if (waited.outcome == LockWaitOutcome::kFailed) {
    ::close(fd);
    return IoError("cannot lock", path, waited.err);
  }
  return std::unique_ptr<LedgerHolderLock>(new LedgerHolderLock(fd));
}

Result<std::unique_ptr<LedgerHolderLock>> LedgerHolderLock::TryExclusive(const std::string& dir) {
  const std::string path = JoinPath(dir, kHolderLockFileName);
  NVDRA_ASSIGN_OR_RETURN(int fd, OpenLockFile(path));
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return std::unique_ptr<LedgerHolderLock>(new LedgerHolderLock(fd));
  int err = errno;
  ::close(fd);
  if (err != EWOULDBLOCK) return IoError("cannot lock", path, err);
  return FailedPrecondition("a plugin has the ledger in " + dir + " open (it holds " + path +
                            "); stop the plugin first");
}

}  // namespace nvdra::ledger
