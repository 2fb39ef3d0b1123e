#include "kubelet/device_health_broadcaster.h"

#include <gtest/gtest.h>

#include <thread>

namespace nvdra::kubelet {
namespace {

using std::chrono::steady_clock;

TEST(DeviceHealthBroadcasterTest, NewWatcherGetsCurrentStateAtOnce) {
  FakeClock clock;
  DeviceHealthBroadcaster b(clock);
  b.Replace({{"pool", "gpu-1", DeviceHealthStatus::kHealthy},
             {"pool", "gpu-0", DeviceHealthStatus::kUnhealthy, 0, 30, "xid 79"}});
  auto snap = b.WaitForChange(0, steady_clock::now());
  ASSERT_TRUE(snap.has_value());
  ASSERT_EQ(snap->devices.size(), 2u);
  EXPECT_EQ(snap->devices[0].device, "gpu-0");  // sorted
  EXPECT_EQ(snap->devices[0].health, DeviceHealthStatus::kUnhealthy);
  EXPECT_EQ(snap->devices[0].message, "xid 79");
  EXPECT_EQ(snap->devices[0].health_check_timeout_seconds, 30);
  EXPECT_EQ(snap->devices[1].last_updated_unix, 1'700'000'000);  // stamped by the clock
  // Nothing new: times out with nullopt.
  EXPECT_FALSE(b.WaitForChange(snap->version, steady_clock::now() + std::chrono::milliseconds(10)));
}

TEST(DeviceHealthBroadcasterTest, UpdateWakesWatcherAndKeepsOthers) {
  DeviceHealthBroadcaster b;
  b.Replace({{"p", "a", DeviceHealthStatus::kHealthy, 5}, {"p", "b", DeviceHealthStatus::kHealthy, 5}});
  uint64_t seen = b.Current().version;
  std::thread t([&] { b.Update({{"p", "b", DeviceHealthStatus::kUnhealthy, 6}}); });
  auto snap = b.WaitForChange(seen, steady_clock::now() + std::chrono::seconds(10));
  t.join();
  ASSERT_TRUE(snap.has_value());
  ASSERT_EQ(snap->devices.size(), 2u);
  EXPECT_EQ(snap->devices[0].health, DeviceHealthStatus::kHealthy);
  EXPECT_EQ(snap->devices[1].health, DeviceHealthStatus::kUnhealthy);
  EXPECT_EQ(snap->devices[1].last_updated_unix, 6);
}

TEST(DeviceHealthBroadcasterTest, CloseEndsWaiters) {
  DeviceHealthBroadcaster b;
  uint64_t seen = b.Current().version;
  std::thread t([&] { b.Close(); });
  EXPECT_FALSE(b.WaitForChange(seen, steady_clock::now() + std::chrono::seconds(10)));
  t.join();
  EXPECT_TRUE(b.Closed());
  EXPECT_STREQ(DeviceHealthStatusName(DeviceHealthStatus::kUnhealthy), "UNHEALTHY");
}

}  // namespace
}  // namespace nvdra::kubelet
