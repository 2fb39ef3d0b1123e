// Client-side token bucket (--kube-api-qps, --kube-api-burst), so a node
// plugin never floods the API server, whatever the kubelet asks of it.
#pragma once

#include <chrono>

#include "util/clock.h"
#include "util/mutex.h"

namespace nvdra::kube {

class RateLimiter {
 public:
  // qps <= 0 disables limiting. burst < 1 is treated as 1.
  RateLimiter(double qps, int burst, const Clock& clock);

  // Takes one token and says how long the caller must wait before using it
  // (zero when a token was available). Tokens may go negative, so concurrent
  // callers queue up in order, each with a later deadline.
  std::chrono::nanoseconds Reserve() EXCLUDES(mu_);

  // Takes a token only when one is available now.
  bool TryAcquire() EXCLUDES(mu_);

 private:
  void RefillLocked(std::chrono::steady_clock::time_point now) REQUIRES(mu_);

  const double qps_;
  const double burst_;
  const Clock& clock_;
  Mutex mu_;
  double tokens_ GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point last_ GUARDED_BY(mu_);
};

}  // namespace nvdra::kube
