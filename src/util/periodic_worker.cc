#include "util/periodic_worker.h"

#include <algorithm>
#include <utility>

#include "util/run_guarded.h"
#include "util/thread_name.h"

namespace nvdra {

PeriodicWorker::PeriodicWorker(PeriodicWorkerOptions options, Work work) : options_(options), work_(std::move(work)) {}

PeriodicWorker::~PeriodicWorker() { Stop(); }

void PeriodicWorker::Start() {
  MutexLock l(mu_);
  if (thread_.joinable() || started_) return;
  stop_ = false;
  next_run_ = options_.clock->SteadyNow();
  if (!options_.run_at_start) next_run_ += NextWait(true);
  if (options_.group) {
    started_ = true;
    l.Unlock();
    options_.group->Add(this);
    return;
  }
  thread_ = std::thread([this] {
    SetThreadName(options_.thread_name);
    Loop();
  });
}

void PeriodicWorker::Stop() {
  bool in_group;
  {
    MutexLock l(mu_);
    stop_ = true;
    in_group = std::exchange(started_, false);
  }
  cv_.NotifyAll();
  if (in_group) options_.group->Remove(this);
  if (thread_.joinable()) thread_.join();
}

void PeriodicWorker::Trigger() {
  {
    MutexLock l(mu_);
    trigger_ = true;
  }
  cv_.NotifyAll();
  if (options_.group) options_.group->Notify();
}

void PeriodicWorker::Wake() {
  // Taking the lock orders this wake-up after the loop's last look at the
  // clock, so it cannot fall between that look and the wait.
  { MutexLock l(mu_); }
  cv_.NotifyAll();
  if (options_.group) options_.group->Notify();
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

bool PeriodicWorker::Due(std::chrono::steady_clock::duration* until) const {
  MutexLock l(mu_);
  if (stop_) {
    *until = std::chrono::steady_clock::duration::max();
    return false;
  }
  if (trigger_) return true;
  auto now = options_.clock->SteadyNow();
  if (now >= next_run_) return true;
  *until = next_run_ - now;
  return false;
}

void PeriodicWorker::RunOnce() {
  {
    MutexLock l(mu_);
    trigger_ = false;
  }
  Status s = RunGuarded(options_.name, work_);
  MutexLock l(mu_);
  ++runs_;
  next_run_ = options_.clock->SteadyNow() + NextWait(s.ok());
  cv_.NotifyAll();
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

PeriodicGroup::PeriodicGroup(std::string thread_name) : thread_name_(std::move(thread_name)) {
  thread_ = std::thread([this] {
    SetThreadName(thread_name_);
    Loop();
  });
}

PeriodicGroup::~PeriodicGroup() {
  {
    MutexLock l(mu_);
    stop_ = true;
  }
  cv_.NotifyAll();
  thread_.join();
}

void PeriodicGroup::Add(PeriodicWorker* worker) {
  {
    MutexLock l(mu_);
    members_.push_back(worker);
  }
  cv_.NotifyAll();
}

void PeriodicGroup::Remove(PeriodicWorker* worker) {
  MutexLock l(mu_);
  std::erase(members_, worker);
  cv_.Wait(mu_, [&]() REQUIRES(mu_) { return running_ != worker; });
}

void PeriodicGroup::Notify() {
  // Taking the lock orders this after the loop's last look at the members,
  // so the wake-up cannot fall between that look and the wait.
  { MutexLock l(mu_); }
  cv_.NotifyAll();
}

void PeriodicGroup::Loop() {
  MutexLock l(mu_);
  while (!stop_) {
    PeriodicWorker* due = nullptr;
    auto wait = std::chrono::steady_clock::duration(std::chrono::hours(1));
    for (size_t i = 0; i < members_.size() && !due; ++i) {
      size_t k = (next_ + i) % members_.size();
      std::chrono::steady_clock::duration until{};
      if (members_[k]->Due(&until)) {
        due = members_[k];
        next_ = k + 1;
      } else {
        wait = std::min(wait, until);
      }
    }
    if (!due) {
      cv_.WaitFor(mu_, wait);
      continue;
    }
    running_ = due;
    l.Unlock();
    due->RunOnce();
    l.Lock();
    running_ = nullptr;
    cv_.NotifyAll();
  }
}

}  // namespace nvdra
