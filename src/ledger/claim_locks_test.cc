#include "ledger/claim_locks.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace nvdra::ledger {
namespace {

using namespace std::chrono_literals;

TEST(ClaimLocksTest, SameClaimIsExclusive) {
  ClaimLocks locks;
  std::atomic<int> inside{0}, max_inside{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&] {
      for (int i = 0; i < 500; ++i) {
        auto g = locks.Lock("uid-a");
        int n = ++inside;
        int m = max_inside.load();
        while (n > m && !max_inside.compare_exchange_weak(m, n)) {
        }
        --inside;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(max_inside.load(), 1);
  EXPECT_EQ(locks.tracked(), 0u);
}

TEST(ClaimLocksTest, DifferentClaimsDoNotBlockEachOther) {
  ClaimLocks locks;
  auto a = locks.Lock("uid-a");
  // Would deadlock (and time out) if claims shared one lock.
  auto b = locks.LockUntil("uid-b", std::chrono::steady_clock::now() + 5s);
  EXPECT_TRUE(b.has_value());
  EXPECT_EQ(locks.tracked(), 2u);
}

TEST(ClaimLocksTest, LockUntilTimesOutWhileHeld) {
  ClaimLocks locks;
  {
    auto a = locks.Lock("uid-a");
    auto again = locks.LockUntil("uid-a", std::chrono::steady_clock::now() + 20ms);
    EXPECT_FALSE(again.has_value());
  }
  EXPECT_EQ(locks.tracked(), 0u);
  EXPECT_TRUE(locks.LockUntil("uid-a", std::chrono::steady_clock::now() + 20ms).has_value());
}

}  // namespace
}  // namespace nvdra::ledger
