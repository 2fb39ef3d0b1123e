#include "util/mutex.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace nvdra {
namespace {

// A counter that exercises every wait form; it compiles only because each
// guarded access holds the lock (the build treats -Wthread-safety as an error).
class Counter {
 public:
  void Add() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    ++n_;
    cv_.NotifyAll();
  }
  void WaitFor(int n) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    cv_.Wait(mu_, [&]() REQUIRES(mu_) { return n_ >= n; });
  }
  bool WaitUntil(int n, std::chrono::steady_clock::time_point deadline) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return cv_.WaitUntil(mu_, deadline, [&]() REQUIRES(mu_) { return n_ >= n; });
  }
  int Get() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return n_;
  }
  // Drops the lock around work that must not run under it.
  int AddOutsideLock() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    int before = n_;
    lock.Unlock();
    Add();
    lock.Lock();
    return n_ - before;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  int n_ GUARDED_BY(mu_) = 0;
};

TEST(MutexTest, WaitersSeeEveryIncrement) {
  Counter c;
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int j = 0; j < 1000; ++j) c.Add();
    });
  }
  c.WaitFor(4000);
  EXPECT_EQ(c.Get(), 4000);
  for (auto& t : threads) t.join();
}

TEST(MutexTest, TimedWaitReportsTimeout) {
  Counter c;
  EXPECT_FALSE(c.WaitUntil(1, std::chrono::steady_clock::now()));
  c.Add();
  EXPECT_TRUE(c.WaitUntil(1, std::chrono::steady_clock::now()));
}

TEST(MutexTest, ScopedLockCanBeDroppedAndRetaken) {
  Counter c;
  EXPECT_EQ(c.AddOutsideLock(), 1);
  EXPECT_EQ(c.Get(), 1);
}

TEST(MutexTest, TryLockFailsWhileHeld) {
  Mutex mu;
  MutexLock lock(mu);
  std::thread t([&] {
    if (mu.TryLock()) {
      mu.Unlock();
      ADD_FAILURE() << "TryLock succeeded while another thread held the mutex";
    }
  });
  t.join();
}

}  // namespace
}  // namespace nvdra
