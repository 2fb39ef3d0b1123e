// A bounded set of threads running queued jobs in FIFO order. Bounds how many
// claims the engine works on at once, independent of how many gRPC calls
// arrive. Threads start only when a job finds no idle one and leave after
// they have been idle for a while (2 s by default: long enough that a
// steady stream of calls keeps its threads, short enough that a plugin is
// back to its idle threads soon after a burst), so an idle plugin holds
// none (each parked thread costs a stack and, with glibc, a share of an
// allocator arena).
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include "util/blocking_region.h"
#include "util/mutex.h"

namespace nvdra::kubelet {

// A job that waits for something other than CPU inside a BlockingRegion
// does not count against max_threads meanwhile: the pool may start another
// thread for the queued jobs, so the pool has at most max_threads threads
// working plus one per job waiting that way.
class WorkerPool final : private BlockingRegion::Pool {
 public:
  static constexpr std::chrono::milliseconds kDefaultIdleExit{2000};

  // At most `max_threads` jobs run at once; a thread with no job for
  // `idle_exit` ends.
  explicit WorkerPool(int max_threads, std::chrono::milliseconds idle_exit = kDefaultIdleExit);
  ~WorkerPool();  // runs what is queued, then joins
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // False once shutdown has begun (the job is not run). An exception that
  // escapes a job is logged and dropped; the thread goes on with the next.
  bool Submit(std::function<void()> job) EXCLUDES(mu_);
  // Stops accepting jobs, finishes the queued ones and joins the threads.
  void Shutdown() EXCLUDES(mu_);

  int size() const { return max_; }
  // Threads alive now (for tests and the footprint benchmark's reasoning).
  int live_threads() EXCLUDES(mu_);
  // Waits until no thread is alive (each one ended after its idle exit) or
  // `deadline` passed; whether none is.
  bool WaitUntilNoThreads(std::chrono::steady_clock::time_point deadline) EXCLUDES(mu_);

 private:
  void Run() EXCLUDES(mu_);
  void JoinExited() EXCLUDES(mu_);
  void EnterBlocking() override EXCLUDES(mu_);
  void LeaveBlocking() override EXCLUDES(mu_);
  // Starts a thread when a queued job finds none idle and fewer than max_
  // threads are working (not waiting in a BlockingRegion).
  void StartThreadIfNeeded() REQUIRES(mu_);

  const int max_;
  const std::chrono::milliseconds idle_exit_;
  Mutex mu_;
  CondVar cv_;
  CondVar all_exited_;
  std::deque<std::function<void()>> queue_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  int idle_ GUARDED_BY(mu_) = 0;
  int blocked_ GUARDED_BY(mu_) = 0;  // threads inside a BlockingRegion
  std::map<std::thread::id, std::thread> threads_ GUARDED_BY(mu_);
  // Ended (or ending) threads not joined yet.
  std::vector<std::thread> exited_ GUARDED_BY(mu_);
};

}  // namespace nvdra::kubelet
