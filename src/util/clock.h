// Injectable time. Components that expire things (tombstones, grace periods,
// rate limits) take a Clock so tests move time instead of sleeping.
#pragma once

#include <chrono>

#include "util/mutex.h"

namespace nvdra {

class Clock {
 public:
  using time_point = std::chrono::system_clock::time_point;
  virtual ~Clock() = default;
  virtual time_point Now() const = 0;
  // Monotonic time for deadlines and durations.
  virtual std::chrono::steady_clock::time_point SteadyNow() const = 0;
};

class SystemClock final : public Clock {
 public:
  static SystemClock& Get() {
    static SystemClock c;
    return c;
  }
  time_point Now() const override { return std::chrono::system_clock::now(); }
  std::chrono::steady_clock::time_point SteadyNow() const override { return std::chrono::steady_clock::now(); }
};

// A clock tests advance by hand.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(time_point start = time_point(std::chrono::seconds(1'700'000'000)))
      : now_(start), steady_(std::chrono::steady_clock::time_point(std::chrono::hours(1))) {}
  time_point Now() const override EXCLUDES(mu_) {
    MutexLock l(mu_);
    return now_;
  }
  std::chrono::steady_clock::time_point SteadyNow() const override EXCLUDES(mu_) {
    MutexLock l(mu_);
    return steady_;
  }
  void Advance(std::chrono::nanoseconds d) EXCLUDES(mu_) {
    MutexLock l(mu_);
    now_ += std::chrono::duration_cast<std::chrono::system_clock::duration>(d);
    steady_ += std::chrono::duration_cast<std::chrono::steady_clock::duration>(d);
  }

 private:
  mutable Mutex mu_;
  time_point now_ GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point steady_ GUARDED_BY(mu_);
};

}  // namespace nvdra
