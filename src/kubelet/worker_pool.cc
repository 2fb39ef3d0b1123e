#include "kubelet/worker_pool.h"

#include "util/run_guarded.h"
#include "util/thread_name.h"

namespace nvdra::kubelet {

WorkerPool::WorkerPool(int max_threads, std::chrono::milliseconds idle_exit)
    : max_(max_threads < 1 ? 1 : max_threads), idle_exit_(idle_exit) {}

WorkerPool::~WorkerPool() { Shutdown(); }

bool WorkerPool::Submit(std::function<void()> job) {
  JoinExited();
  MutexLock lock(mu_);
  if (stopping_) return false;
  queue_.push_back(std::move(job));
  StartThreadIfNeeded();
  return true;
}

void WorkerPool::StartThreadIfNeeded() {
  // A thread is started only when none is waiting for work: the queue never
  // holds more jobs than there are busy threads unless the pool is full.
  if (idle_ < static_cast<int>(queue_.size()) && static_cast<int>(threads_.size()) - blocked_ < max_) {
    std::thread t([this] {
      SetThreadName("claim-worker");
      BlockingRegion::SetThreadPool(this);
      Run();
    });
    threads_.emplace(t.get_id(), std::move(t));
  } else {
    cv_.NotifyOne();
  }
}

void WorkerPool::EnterBlocking() {
  MutexLock lock(mu_);
  ++blocked_;
  if (!stopping_ && !queue_.empty()) StartThreadIfNeeded();
}

void WorkerPool::LeaveBlocking() {
  MutexLock lock(mu_);
  --blocked_;
}

int WorkerPool::live_threads() {
  MutexLock lock(mu_);
  return static_cast<int>(threads_.size());
}

bool WorkerPool::WaitUntilNoThreads(std::chrono::steady_clock::time_point deadline) {
  MutexLock lock(mu_);
  return all_exited_.WaitUntil(mu_, deadline, [this]() REQUIRES(mu_) { return threads_.empty(); });
}

void WorkerPool::JoinExited() {
  std::vector<std::thread> done;
  {
    MutexLock lock(mu_);
    done.swap(exited_);
  }
  for (auto& t : done) t.join();
}

void WorkerPool::Shutdown() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
    cv_.NotifyAll();
    all_exited_.Wait(mu_, [this]() REQUIRES(mu_) { return threads_.empty(); });
  }
  JoinExited();
}

void WorkerPool::Run() {
  MutexLock lock(mu_);
  for (;;) {
    ++idle_;
    bool woke = cv_.WaitFor(mu_, idle_exit_, [this]() REQUIRES(mu_) { return stopping_ || !queue_.empty(); });
    --idle_;
    if (queue_.empty()) {
      // Stopping and drained, or idle for idle_exit_: hand this thread to
      // the next Submit or Shutdown to join, and end.
      (void)woke;
      auto self = threads_.find(std::this_thread::get_id());
      exited_.push_back(std::move(self->second));
      threads_.erase(self);
      if (threads_.empty()) all_exited_.NotifyAll();
      return;
    }
    std::function<void()> job = std::move(queue_.front());
    queue_.pop_front();
    lock.Unlock();
    // Logged by the barrier; the pool keeps its thread either way.
    (void)RunGuarded("a worker pool job", job);
    job = nullptr;  // the job's captures die outside the lock
    lock.Lock();
  }
}

}  // namespace nvdra::kubelet
