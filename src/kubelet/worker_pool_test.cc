#include "kubelet/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <stdexcept>
#include <thread>

namespace nvdra::kubelet {
namespace {

TEST(WorkerPoolTest, RunsEveryJobAndDrainsOnShutdown) {
  std::atomic<int> ran{0};
  WorkerPool pool(3);
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(pool.Submit([&] { ++ran; }));
  pool.Shutdown();
  EXPECT_EQ(ran.load(), 50);
  EXPECT_FALSE(pool.Submit([&] { ++ran; }));
  EXPECT_EQ(ran.load(), 50);
}

TEST(WorkerPoolTest, JobsRunConcurrently) {
  // The first job waits for the second: only possible with two threads.
  WorkerPool pool(2);
  std::promise<void> second_ran;
  std::promise<void> first_done;
  pool.Submit([&] {
    second_ran.get_future().wait();
    first_done.set_value();
  });
  pool.Submit([&] { second_ran.set_value(); });
  EXPECT_EQ(first_done.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
}

TEST(WorkerPoolTest, AJobWaitingInABlockingRegionLetsTheQueuedJobsRun) {
  // One thread: the first job waits for the second (as a channel claim
  // waits for the IMEX daemon whose claim is queued behind it). Inside a
  // BlockingRegion the pool starts another thread for the second.
  WorkerPool pool(1);
  std::promise<void> second_ran;
  std::promise<bool> first_done;
  pool.Submit([&] {
    BlockingRegion waiting;
    first_done.set_value(second_ran.get_future().wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  });
  pool.Submit([&] { second_ran.set_value(); });
  auto done = first_done.get_future();
  ASSERT_EQ(done.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_TRUE(done.get()) << "the queued job did not run while the first waited";
  // Outside the pool a BlockingRegion does nothing.
  { BlockingRegion outside; }
}

TEST(WorkerPoolTest, ThrowingJobDoesNotEndItsThread) {
  // Without the barrier the exception would end the whole process.
  WorkerPool pool(1);
  std::promise<void> after;
  ASSERT_TRUE(pool.Submit([] { throw std::runtime_error("job failed"); }));
  ASSERT_TRUE(pool.Submit([&] { after.set_value(); }));
  EXPECT_EQ(after.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
}

TEST(WorkerPoolTest, StartsNoThreadUntilAJobArrives) {
  WorkerPool pool(8);
  EXPECT_EQ(pool.live_threads(), 0);
  std::promise<void> ran;
  pool.Submit([&] { ran.set_value(); });
  EXPECT_EQ(ran.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(pool.live_threads(), 1);
}

TEST(WorkerPoolTest, NeverRunsMoreThanItsMaximumAtOnce) {
  WorkerPool pool(3);
  std::promise<void> release;
  std::shared_future<void> go = release.get_future().share();
  std::atomic<int> running{0}, peak{0}, done{0};
  for (int i = 0; i < 10; ++i) {
    pool.Submit([&] {
      int now = ++running;
      int p = peak.load();
      while (now > p && !peak.compare_exchange_weak(p, now)) {
      }
      go.wait();
      --running;
      ++done;
    });
  }
  EXPECT_EQ(pool.live_threads(), 3);
  release.set_value();
  pool.Shutdown();
  EXPECT_EQ(done.load(), 10);
  EXPECT_LE(peak.load(), 3);
  EXPECT_EQ(pool.live_threads(), 0);
}

TEST(WorkerPoolTest, IdleThreadsEndAndNewWorkStartsThemAgain) {
  WorkerPool pool(4, std::chrono::milliseconds(20));
  std::atomic<int> ran{0};
  for (int i = 0; i < 4; ++i) pool.Submit([&] { ++ran; });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (pool.live_threads() > 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  EXPECT_EQ(pool.live_threads(), 0);
  EXPECT_EQ(ran.load(), 4);
  std::promise<void> again;
  EXPECT_TRUE(pool.Submit([&] { again.set_value(); }));
  EXPECT_EQ(again.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
}

}  // namespace
}  // namespace nvdra::kubelet
