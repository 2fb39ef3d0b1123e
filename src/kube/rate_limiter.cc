#include "kube/rate_limiter.h"

#include <algorithm>

namespace nvdra::kube {

RateLimiter::RateLimiter(double qps, int burst, const Clock& clock)
    : qps_(qps), burst_(std::max(1, burst)), clock_(clock), tokens_(burst_), last_(clock.SteadyNow()) {}

void RateLimiter::RefillLocked(std::chrono::steady_clock::time_point now) {
  if (now > last_) {
    double elapsed = std::chrono::duration<double>(now - last_).count();
    tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
    last_ = now;
  }
}

std::chrono::nanoseconds RateLimiter::Reserve() {
  if (qps_ <= 0) return std::chrono::nanoseconds(0);
  MutexLock l(mu_);
  RefillLocked(clock_.SteadyNow());
  tokens_ -= 1;
  if (tokens_ >= 0) return std::chrono::nanoseconds(0);
  return std::chrono::nanoseconds(static_cast<int64_t>(-tokens_ / qps_ * 1e9));
}

bool RateLimiter::TryAcquire() {
  if (qps_ <= 0) return true;
  MutexLock l(mu_);
  RefillLocked(clock_.SteadyNow());
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

}  // namespace nvdra::kube
