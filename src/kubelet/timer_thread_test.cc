#include "kubelet/timer_thread.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <vector>

#include "util/mutex.h"

namespace nvdra::kubelet {
namespace {

using Clock = TimerThread::Clock;
using std::chrono::milliseconds;

TEST(TimerThreadTest, RunsClosuresInOrderOfTheirTimeOnItsThread) {
  TimerThread timers("test-timers");
  Mutex mu;
  std::vector<int> ran;
  std::promise<void> last;
  const auto now = Clock::now();
  // Scheduled out of order: run by due time.
  timers.RunAt(now + milliseconds(30), [&] {
    MutexLock l(mu);
    ran.push_back(3);
    last.set_value();
  });
  timers.RunAt(now, [&] {
    EXPECT_TRUE(timers.IsTimerThread());
    MutexLock l(mu);
    ran.push_back(1);
  });
  timers.RunAt(now + milliseconds(10), [&] {
    MutexLock l(mu);
    ran.push_back(2);
  });
  last.get_future().wait();
  EXPECT_FALSE(timers.IsTimerThread());
  MutexLock l(mu);
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 3}));
}

TEST(TimerThreadTest, CancelledClosuresNeverRunAndCancelAllTakesOnlyItsOwners) {
  TimerThread timers("test-timers");
  std::atomic<int> ran{0};
  int a = 0, b = 0;
  const auto later = Clock::now() + std::chrono::hours(1);
  auto one = timers.RunAt(
      later, [&] { ran++; }, &a);
  timers.RunAt(
      later, [&] { ran++; }, &a);
  auto kept = timers.RunAt(
      later, [&] { ran++; }, &b);
  EXPECT_TRUE(timers.Cancel(one));
  EXPECT_FALSE(timers.Cancel(one));  // once only
  timers.CancelAll(&a);
  EXPECT_TRUE(timers.Cancel(kept));  // b's was still there
  std::promise<void> drained;
  timers.RunAt(Clock::now(), [&] { drained.set_value(); });
  drained.get_future().wait();
  EXPECT_EQ(ran.load(), 0);
}

}  // namespace
}  // namespace nvdra::kubelet
