#include "util/periodic_worker.h"

#include <utility>

namespace nvdra {

PeriodicWorker::PeriodicWorker(PeriodicWorkerOptions options, Work work)
    : options_(options), work_(std::move(work)) {}

PeriodicWorker::~PeriodicWorker() { Stop(); }

void PeriodicWorker::Start() {
  std::lock_guard<std::mutex> l(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  next_run_ = options_.clock->SteadyNow();
  if (!options_.run_at_start) next_run_ += NextWait(true);
  thread_ = std::thread([this] { Loop(); });
}

void PeriodicWorker::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PeriodicWorker::Trigger() {
  {
    std::lock_guard<std::mutex> l(mu_);
    trigger_ = true;
  }
  cv_.notify_all();
}

void PeriodicWorker::Wake() {
  // Taking the lock orders this wake-up after the loop's last look at the
  // clock, so it cannot fall between that look and the wait.
  { std::lock_guard<std::mutex> l(mu_); }
  cv_.notify_all();
}

bool PeriodicWorker::WaitForRuns(uint64_t runs, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> l(mu_);
  return cv_.wait_for(l, timeout, [&] { return runs_ >= runs; });
}

uint64_t PeriodicWorker::runs() const {
  std::lock_guard<std::mutex> l(mu_);
  return runs_;
}

std::chrono::steady_clock::time_point PeriodicWorker::next_run() const {
  std::lock_guard<std::mutex> l(mu_);
  return next_run_;
}

std::chrono::steady_clock::duration PeriodicWorker::NextWait(bool ok) {
  auto base = ok || options_.retry_period.count() <= 0 ? options_.period : options_.retry_period;
  if (options_.jitter <= 0) return base;
  std::uniform_real_distribution<double> u(0.0, options_.jitter);
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(base * (1.0 + u(rng_)));
}

void PeriodicWorker::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    while (!stop_ && !trigger_) {
      auto now = options_.clock->SteadyNow();
      if (now >= next_run_) break;
      cv_.wait_for(l, next_run_ - now);
    }
    if (stop_) return;
    trigger_ = false;
    l.unlock();
    Status s = work_();
    l.lock();
    ++runs_;
    next_run_ = options_.clock->SteadyNow() + NextWait(s.ok());
    cv_.notify_all();
  }
}

}  // namespace nvdra
