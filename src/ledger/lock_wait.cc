#include "ledger/lock_wait.h"

#include <unistd.h>

#include <cerrno>
#include <memory>
#include <thread>

#include "util/mutex.h"

namespace nvdra::ledger {
namespace {

// Shared by the caller waiting with a deadline and the thread blocking in
// the lock call; whichever finishes last frees it.
struct SharedWait {
  Mutex mu;
  CondVar cv;
  bool done GUARDED_BY(mu) = false;
  bool abandoned GUARDED_BY(mu) = false;
  int err GUARDED_BY(mu) = 0;
};

}  // namespace

LockWaitResult WaitForLock(int fd, std::function<int(int fd)> lock_call,
                           std::chrono::steady_clock::time_point deadline) {
  auto wait = std::make_shared<SharedWait>();
  std::thread([wait, fd, call = std::move(lock_call)] {
    int rc;
    do {
      rc = call(fd);
    } while (rc != 0 && errno == EINTR);
    int err = rc == 0 ? 0 : errno;
    MutexLock l(wait->mu);
    wait->err = err;
    wait->done = true;
    if (wait->abandoned) {
      ::close(fd);  // releases the lock if the call got it after the deadline
      return;
    }
    wait->cv.NotifyAll();
  }).detach();
  MutexLock l(wait->mu);
  if (!wait->cv.WaitUntil(wait->mu, deadline, [&]() REQUIRES(wait->mu) { return wait->done; })) {
    wait->abandoned = true;
    return {LockWaitOutcome::kTimedOut, 0};
  }
  if (wait->err != 0) return {LockWaitOutcome::kFailed, wait->err};
  return {LockWaitOutcome::kLocked, 0};
}

}  // namespace nvdra::ledger
