#include "util/periodic_worker.h"

#include <utility>

#include "util/run_guarded.h"
#include "util/thread_name.h"

namespace nvdra {

PeriodicWorker::PeriodicWorker(PeriodicWorkerOptions options, Work work)
    : options_(options), work_(std::move(work)) {}

PeriodicWorker::~PeriodicWorker() { Stop(); }

void PeriodicWorker::Start() {
  MutexLock l(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  next_run_ = options_.clock->SteadyNow();
  if (!options_.run_at_start) next_run_ += NextWait(true);
  thread_ = std::thread([this] {
    SetThreadName(options_.thread_name);
    Loop();
  });
}

void PeriodicWorker::Stop() {
  {
    MutexLock l(mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void PeriodicWorker::Trigger() {
  {
    MutexLock l(mu_);
    trigger_ = true;
  }
  cv_.NotifyAll();
}

void PeriodicWorker::Wake() {
  // Taking the lock orders this wake-up after the loop's last look at the
  // clock, so it cannot fall between that look and the wait.
  { MutexLock l(mu_); }
  cv_.NotifyAll();
}

bool PeriodicWorker::WaitForRuns(uint64_t runs, std::chrono::milliseconds timeout) const {
  MutexLock l(mu_);
  return cv_.WaitFor(mu_, timeout, [&]() REQUIRES(mu_) { return runs_ >= runs; });
}

uint64_t PeriodicWorker::runs() const {
  MutexLock l(mu_);
  return runs_;
}

std::chrono::steady_clock::time_point PeriodicWorker::next_run() const {
  MutexLock l(mu_);
  return next_run_;
}

std::chrono::steady_clock::duration PeriodicWorker::NextWait(bool ok) {
  auto base = ok || options_.retry_period.count() <= 0 ? options_.period : options_.retry_period;
  if (options_.jitter <= 0) return base;
  std::uniform_real_distribution<double> u(0.0, options_.jitter);
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(base * (1.0 + u(rng_)));
}

void PeriodicWorker::Loop() {
  MutexLock l(mu_);
  for (;;) {
    while (!stop_ && !trigger_) {
      auto now = options_.clock->SteadyNow();
      if (now >= next_run_) break;
      cv_.WaitFor(mu_, next_run_ - now);
    }
    if (stop_) return;
    trigger_ = false;
    l.Unlock();
    // The barrier: an exception from the work must not end this thread (and
    // with it the process); it counts as a failed run.
    Status s = RunGuarded(options_.name, work_);
    l.Lock();
    ++runs_;
    next_run_ = options_.clock->SteadyNow() + NextWait(s.ok());
    cv_.NotifyAll();
  }
}

}  // namespace nvdra
