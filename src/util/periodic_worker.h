// A background thread that runs one piece of work again and again: every
// period (stretched by a random jitter so many nodes do not act in step),
// sooner after a failure when a retry period is set, at once when triggered,
// and never again once stopped. The reconciler, the slice publisher and the
// mock health source share it, so their loops stop and wake the same way.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

#include "util/clock.h"
#include "util/status.h"

namespace nvdra {

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
};

class PeriodicWorker {
 public:
  // The work's status only chooses the next wait (period or retry period);
  // reporting the failure is the work's business.
  using Work = std::function<Status()>;

  PeriodicWorker(PeriodicWorkerOptions options, Work work);
  // Stops the thread.
  ~PeriodicWorker();
  PeriodicWorker(const PeriodicWorker&) = delete;
  PeriodicWorker& operator=(const PeriodicWorker&) = delete;

  // Starts the thread; a no-op while it runs.
  void Start();
  // Lets a run in progress finish, then joins the thread: no run starts after
  // Stop returns, however long the wait in progress was. Idempotent; must
  // not be called from the work itself.
  void Stop();
  // Asks for a run as soon as the current one (if any) has finished; several
  // triggers before that run make one run.
  void Trigger();
  // Re-reads the clock now instead of when the current wait would end; the
  // run still happens only when it is due.
  void Wake();

  // Waits until at least `runs` runs completed; false on timeout.
  bool WaitForRuns(uint64_t runs, std::chrono::milliseconds timeout) const;
  uint64_t runs() const;
  // When the next run is due, on the options' clock (jitter included).
  std::chrono::steady_clock::time_point next_run() const;

 private:
  void Loop();
  std::chrono::steady_clock::duration NextWait(bool ok);

  const PeriodicWorkerOptions options_;
  const Work work_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool stop_ = false;
  bool trigger_ = false;
  uint64_t runs_ = 0;
  std::chrono::steady_clock::time_point next_run_;
  std::mt19937_64 rng_{std::random_device{}()};
  std::thread thread_;
};

}  // namespace nvdra
