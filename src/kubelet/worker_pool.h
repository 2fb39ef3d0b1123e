// A fixed set of threads running queued jobs in FIFO order. Bounds how many
// claims the engine works on at once, independent of how many gRPC calls
// arrive.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace nvdra::kubelet {

class WorkerPool {
 public:
  explicit WorkerPool(int threads);
  ~WorkerPool();  // runs what is queued, then joins
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // False once shutdown has begun (the job is not run).
  bool Submit(std::function<void()> job);
  // Stops accepting jobs, finishes the queued ones and joins the threads.
  void Shutdown();

  int size() const { return static_cast<int>(threads_.size()); }

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace nvdra::kubelet
