#include "kubelet/shutdown_signal.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace nvdra::kubelet {
namespace {

using std::chrono::steady_clock;

// A startup retry waits minutes between attempts; a request must end that
// wait at once, not when it runs out.
TEST(ShutdownWatchTest, RequestEndsAWaitInProgress) {
  ShutdownWatch watch;
  EXPECT_EQ(watch.signal(), 0);
  bool interrupted = false;
  steady_clock::duration waited{};
  std::thread waiter([&] {
    auto start = steady_clock::now();
    interrupted = watch.WaitFor(std::chrono::minutes(10));
    waited = steady_clock::now() - start;
  });
  watch.Request(SIGTERM);
  waiter.join();
  EXPECT_TRUE(interrupted);
  EXPECT_LT(waited, std::chrono::seconds(5));
  EXPECT_EQ(watch.signal(), SIGTERM);
}

TEST(ShutdownWatchTest, LaterWaitsReturnAtOnceAndKeepTheFirstSignal) {
  ShutdownWatch watch;
  EXPECT_FALSE(watch.WaitFor(std::chrono::milliseconds(0)));
  watch.Request(SIGINT);
  watch.Request(SIGTERM);
  EXPECT_TRUE(watch.WaitFor(std::chrono::minutes(10)));
  EXPECT_EQ(watch.Wait(), SIGINT);
}

// Its own binary runs no other thread, so the blocked signal can only reach
// the watch's thread.
TEST(ShutdownWatchTest, TakesARealSignalSentToTheProcess) {
  ShutdownSignal::Block();
  auto watch = ShutdownWatch::Start();
  ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);
  EXPECT_EQ(watch->Wait(), SIGTERM);
  EXPECT_TRUE(watch->WaitFor(std::chrono::minutes(10)));
}

TEST(ShutdownWatchTest, EndsItsThreadWithoutASignal) {
  ShutdownSignal::Block();
  auto watch = ShutdownWatch::Start();
  EXPECT_EQ(watch->signal(), 0);
  watch.reset();  // joins the thread
}

// Once the plugin has started, the watch's thread ends and the main thread
// waits: a signal sent after that is not lost, it is still pending for
// ShutdownSignal::Wait().
TEST(ShutdownWatchTest, ASignalAfterStopTakingIsLeftForTheMainThread) {
  ShutdownSignal::Block();
  auto watch = ShutdownWatch::Start();
  EXPECT_EQ(watch->StopTaking(), 0);
  ASSERT_EQ(::kill(::getpid(), SIGINT), 0);
  EXPECT_EQ(ShutdownSignal::Wait(), SIGINT);
  EXPECT_EQ(watch->signal(), 0) << "the stopped watch took nothing";
}

}  // namespace
}  // namespace nvdra::kubelet
