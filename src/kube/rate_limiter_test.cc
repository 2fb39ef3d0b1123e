#include "kube/rate_limiter.h"

#include <gtest/gtest.h>

namespace nvdra::kube {
namespace {

using namespace std::chrono_literals;

TEST(RateLimiterTest, BurstThenQps) {
  FakeClock clock;
  RateLimiter rl(5, 10, clock);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(rl.Reserve(), 0ns) << i;
  // The 11th and 12th wait one and two token periods (200 ms at 5 qps).
  EXPECT_EQ(rl.Reserve(), 200ms);
  EXPECT_EQ(rl.Reserve(), 400ms);
}

TEST(RateLimiterTest, BoundOverAWindow) {
  FakeClock clock;
  RateLimiter rl(5, 10, clock);
  // Over 10 s of fake time, at most burst + qps*10 = 60 requests go through.
  int granted = 0;
  for (int step = 0; step <= 100; ++step) {
    while (rl.TryAcquire()) ++granted;
    clock.Advance(100ms);
  }
  EXPECT_LE(granted, 10 + 5 * 10 + 1);
  EXPECT_GE(granted, 10 + 5 * 10 - 1);
}

TEST(RateLimiterTest, RefillCappedAtBurst) {
  FakeClock clock;
  RateLimiter rl(5, 3, clock);
  clock.Advance(1h);
  int granted = 0;
  while (rl.TryAcquire()) ++granted;
  EXPECT_EQ(granted, 3);
}

TEST(RateLimiterTest, ZeroQpsDisables) {
  FakeClock clock;
  RateLimiter rl(0, 1, clock);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(rl.Reserve(), 0ns);
}

}  // namespace
}  // namespace nvdra::kube
