#include "kubelet/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <stdexcept>

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

TEST(WorkerPoolTest, ThrowingJobDoesNotEndItsThread) {
  // One thread: the job after the throwing one runs only if the thread lived.
  WorkerPool pool(1);
  std::promise<void> after;
  ASSERT_TRUE(pool.Submit([] { throw std::runtime_error("job failed"); }));
  ASSERT_TRUE(pool.Submit([&] { after.set_value(); }));
  EXPECT_EQ(after.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
}

}  // namespace
}  // namespace nvdra::kubelet
