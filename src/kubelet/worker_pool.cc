#include "kubelet/worker_pool.h"

#include "util/run_guarded.h"

namespace nvdra::kubelet {

WorkerPool::WorkerPool(int threads) {
  if (threads < 1) threads = 1;
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
}

WorkerPool::~WorkerPool() { Shutdown(); }

bool WorkerPool::Submit(std::function<void()> job) {
  {
    MutexLock lock(mu_);
    if (stopping_) return false;
    queue_.push_back(std::move(job));
  }
  cv_.NotifyOne();
  return true;
}

void WorkerPool::Shutdown() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void WorkerPool::Run() {
  for (;;) {
    std::function<void()> job;
    {
      MutexLock lock(mu_);
      cv_.Wait(mu_, [this]() REQUIRES(mu_) { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    // Logged by the barrier; the pool keeps its thread either way.
    (void)RunGuarded("a worker pool job", job);
  }
}

}  // namespace nvdra::kubelet
