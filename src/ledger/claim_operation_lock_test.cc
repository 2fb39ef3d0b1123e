#include "ledger/claim_operation_lock.h"

#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include <gtest/gtest.h>

#include "util/test_temp_dir.h"

namespace nvdra::ledger {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

TEST(ClaimOperationLockTest, OneClaimIsExclusiveOtherClaimsAreNot) {
  nvdra::testing::TempDir dir;
  ClaimOperationLocks locks(dir.path());
  auto a = locks.Acquire("uid-a", Steady::now() + 5s);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  // Another open file description (another process, or another thread here).
  ClaimOperationLocks other(dir.path());
  auto again = other.TryAcquire("uid-a");
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->has_value());
  auto b = other.TryAcquire("uid-b");
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->has_value());
}

TEST(ClaimOperationLockTest, AcquireGivesUpAtItsDeadline) {
  nvdra::testing::TempDir dir;
  ClaimOperationLocks locks(dir.path());
  auto held = locks.Acquire("uid-a", Steady::now() + 5s);
  ASSERT_TRUE(held.ok());
  auto t0 = Steady::now();
  auto late = locks.Acquire("uid-a", t0 + 100ms);
  EXPECT_EQ(late.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_GE(Steady::now() - t0, 100ms);
  EXPECT_NE(late.status().message().find("another operation on claim uid-a"), std::string::npos);
  // The abandoned waiter must not keep the lock once it is released.
  { auto drop = std::move(*held); }
  auto next = locks.Acquire("uid-a", Steady::now() + 5s);
  EXPECT_TRUE(next.ok()) << next.status().ToString();
}

TEST(ClaimOperationLockTest, AWaiterGetsTheLockWhenItIsReleased) {
  nvdra::testing::TempDir dir;
  ClaimOperationLocks locks(dir.path());
  auto first = locks.Acquire("uid-a", Steady::now() + 5s);
  ASSERT_TRUE(first.ok());
  std::optional<ClaimOperationLock> held(std::move(first).value());
  Status waited = Internal("not run");
  std::thread waiter([&] { waited = locks.Acquire("uid-a", Steady::now() + 30s).status(); });
  held.reset();
  waiter.join();
  EXPECT_TRUE(waited.ok()) << waited.ToString();
}

TEST(ClaimOperationLockTest, ExcludesAnotherProcessAndIsFreedWhenItDies) {
  nvdra::testing::TempDir dir;
  int to_child[2], to_parent[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(to_parent), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ClaimOperationLocks locks(dir.path());
    auto l = locks.Acquire("uid-a", Steady::now() + 5s);
    char c = l.ok() ? 'y' : 'n';
    (void)!write(to_parent[1], &c, 1);
    (void)!read(to_child[0], &c, 1);  // hold it until told, then die holding it
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(to_parent[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  ClaimOperationLocks locks(dir.path());
  auto busy = locks.TryAcquire("uid-a");
  ASSERT_TRUE(busy.ok());
  EXPECT_FALSE(busy->has_value()) << "the other process holds the claim";
  EXPECT_TRUE(locks.TryAcquire("uid-b")->has_value());
  ASSERT_EQ(write(to_child[1], "x", 1), 1);
  int status = 0;
  waitpid(pid, &status, 0);
  auto after = locks.Acquire("uid-a", Steady::now() + 5s);
  EXPECT_TRUE(after.ok()) << after.status().ToString();
}

TEST(ClaimOperationLockTest, OffsetsAreStableAndSpread) {
  EXPECT_EQ(ClaimOperationLocks::OffsetOf("6f1c0000-0000-0000-0000-000000000001"),
            ClaimOperationLocks::OffsetOf("6f1c0000-0000-0000-0000-000000000001"));
  EXPECT_NE(ClaimOperationLocks::OffsetOf("6f1c0000-0000-0000-0000-000000000001"),
            ClaimOperationLocks::OffsetOf("6f1c0000-0000-0000-0000-000000000002"));
  EXPECT_LT(ClaimOperationLocks::OffsetOf("x"), 1ULL << 62);
}

}  // namespace
}  // namespace nvdra::ledger
