// A background thread that runs one piece of work again and again: every
// period (stretched by a random jitter so many nodes do not act in step),
// sooner after a failure when a retry period is set, at once when triggered,
// and never again once stopped. The reconciler, the slice publisher and the
// mock health source share it, so their loops stop and wake the same way.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "util/clock.h"
#include "util/mutex.h"
#include "util/status.h"

namespace nvdra {

class PeriodicWorker;

// One thread that runs the work of several PeriodicWorkers, one run at a
// time: background loops that are mostly idle (the reconciler, the slice
// sync, ComputeDomain maintenance) then cost one parked thread between
// them instead of one each. A run delays the others' runs that fall due
// meanwhile, so only short work belongs in a group. Workers that fall due
// together run in turn, so one that is triggered again and again does not
// starve the rest. Must outlive its workers (they leave it at Stop).
class PeriodicGroup {
 public:
  explicit PeriodicGroup(std::string thread_name);
  ~PeriodicGroup();
  PeriodicGroup(const PeriodicGroup&) = delete;
  PeriodicGroup& operator=(const PeriodicGroup&) = delete;

 private:
  friend class PeriodicWorker;
  void Add(PeriodicWorker* worker) EXCLUDES(mu_);
  // Returns once `worker` is not running and will not run again.
  void Remove(PeriodicWorker* worker) EXCLUDES(mu_);
  // A member's trigger, wake-up or stop: look at the members again.
  void Notify() EXCLUDES(mu_);
  void Loop() EXCLUDES(mu_);

  const std::string thread_name_;
  Mutex mu_;
  CondVar cv_;
  std::vector<PeriodicWorker*> members_ GUARDED_BY(mu_);
  size_t next_ GUARDED_BY(mu_) = 0;  // where the next look for due work starts
  PeriodicWorker* running_ GUARDED_BY(mu_) = nullptr;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

struct PeriodicWorkerOptions {
  // The wait after a run that succeeded.
  std::chrono::milliseconds period{60'000};
  // The wait after a run that failed; zero: the period.
  std::chrono::milliseconds retry_period{0};
  // Each wait is stretched by U[0, jitter] of itself.
  double jitter = 0.0;
  // Run as soon as the thread starts; otherwise the first run is one period
  // after Start (for owners that ran the work themselves before starting).
  bool run_at_start = true;
  // Where waits are measured. A clock moved by hand does not wake a waiting
  // thread by itself: call Wake() after moving it.
  const Clock* clock = &SystemClock::Get();
  // Names the work in the log line when it throws (see Work).
  std::string name = "periodic work";
  // The thread's name (15 characters at most), as `top -H` shows it.
  std::string thread_name = "nvdra-periodic";
  // Run on this group's thread instead of a thread of its own.
  PeriodicGroup* group = nullptr;
};

class PeriodicWorker {
 public:
  // The work's status only chooses the next wait (period or retry period);
  // reporting the failure is the work's business. An exception that escapes
  // the work is logged (RunGuarded) and counts as a failed run; the thread
  // goes on.
  using Work = std::function<Status()>;

  PeriodicWorker(PeriodicWorkerOptions options, Work work);
  // Stops the thread.
  ~PeriodicWorker();
  PeriodicWorker(const PeriodicWorker&) = delete;
  PeriodicWorker& operator=(const PeriodicWorker&) = delete;

  // Starts the thread (or joins the group); a no-op while it runs.
  void Start() EXCLUDES(mu_);
  // Lets a run in progress finish, then joins the thread: no run starts after
  // Stop returns, however long the wait in progress was. Idempotent; must
  // not be called from the work itself.
  void Stop() EXCLUDES(mu_);
  // Asks for a run as soon as the current one (if any) has finished; several
  // triggers before that run make one run.
  void Trigger() EXCLUDES(mu_);
  // Re-reads the clock now instead of when the current wait would end; the
  // run still happens only when it is due.
  void Wake() EXCLUDES(mu_);

  // Waits until at least `runs` runs completed; false on timeout.
  bool WaitForRuns(uint64_t runs, std::chrono::milliseconds timeout) const EXCLUDES(mu_);
  uint64_t runs() const EXCLUDES(mu_);
  // When the next run is due, on the options' clock (jitter included).
  std::chrono::steady_clock::time_point next_run() const EXCLUDES(mu_);

 private:
  friend class PeriodicGroup;
  void Loop() EXCLUDES(mu_);
  // For the group: whether a run is due now, else how long until one is.
  bool Due(std::chrono::steady_clock::duration* until) const EXCLUDES(mu_);
  // One run of the work, and the bookkeeping after it.
  void RunOnce() EXCLUDES(mu_);
  std::chrono::steady_clock::duration NextWait(bool ok) REQUIRES(mu_);

  const PeriodicWorkerOptions options_;
  const Work work_;

  mutable Mutex mu_;
  mutable CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  bool started_ GUARDED_BY(mu_) = false;  // in the group, when there is one
  bool trigger_ GUARDED_BY(mu_) = false;
  uint64_t runs_ GUARDED_BY(mu_) = 0;
  std::chrono::steady_clock::time_point next_run_ GUARDED_BY(mu_);
  std::mt19937_64 rng_ GUARDED_BY(mu_){std::random_device{}()};
  // Set by Start under mu_; joined by Stop outside it (the loop needs mu_ to
  // finish), which is safe because only the owner calls Start and Stop.
  std::thread thread_;
};

}  // namespace nvdra
