// A fixed set of threads running queued jobs in FIFO order. Bounds how many
// claims the engine works on at once, independent of how many gRPC calls
// arrive.
#pragma once

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "util/mutex.h"

namespace nvdra::kubelet {

class WorkerPool {
 public:
  explicit WorkerPool(int threads);
  ~WorkerPool();  // runs what is queued, then joins
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // False once shutdown has begun (the job is not run). An exception that
  // escapes a job is logged and dropped; the thread goes on with the next.
  bool Submit(std::function<void()> job) EXCLUDES(mu_);
  // Stops accepting jobs, finishes the queued ones and joins the threads.
  void Shutdown() EXCLUDES(mu_);

  int size() const { return static_cast<int>(threads_.size()); }

 private:
  void Run() EXCLUDES(mu_);

  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> queue_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;  // fixed after construction
};

}  // namespace nvdra::kubelet
