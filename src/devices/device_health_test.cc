#include "devices/device_health.h"

#include <gtest/gtest.h>

namespace nvdra::devices {
namespace {

GpuInfo MigGpu() {
  GpuInfo g;
  g.minor = 1;
  g.mig_enabled = true;
  g.migs.push_back(MigDeviceInfo{.parent_minor = 1,
                                 .profile = "1g.10gb",
                                 .gi_profile_id = 19,
                                 .gi_id = 9,
                                 .ci_id = 0,
                                 .placement_start = 6,
                                 .placement_size = 1});
  g.migs.push_back(MigDeviceInfo{.parent_minor = 1,
                                 .profile = "3g.40gb",
                                 .gi_profile_id = 9,
                                 .gi_id = 2,
                                 .ci_id = 0,
                                 .placement_start = 0,
                                 .placement_size = 4});
  return g;
}

TEST(AffectedDevicesTest, FullGpu) {
  GpuInfo g;
  g.minor = 4;
  EXPECT_EQ(AffectedDevices(g, std::nullopt, std::nullopt), (std::vector<std::string>{"gpu-4"}));
  EXPECT_EQ(AffectedDevices(g, 3, 0), (std::vector<std::string>{"gpu-4"}));
}

TEST(AffectedDevicesTest, MigInstanceOrWholeGpu) {
  GpuInfo g = MigGpu();
  EXPECT_EQ(AffectedDevices(g, 9, 0), (std::vector<std::string>{"gpu-1-mig-1g10gb-19-6"}));
  EXPECT_EQ(AffectedDevices(g, 2, std::nullopt), (std::vector<std::string>{"gpu-1-mig-3g40gb-9-0"}));
  EXPECT_TRUE(AffectedDevices(g, 9, 1).empty());
  // A GPU-wide event on a MIG-enabled GPU reaches every partition.
  EXPECT_EQ(AffectedDevices(g, std::nullopt, std::nullopt).size(), 2u);
}

TEST(HealthStateTest, Names) {
  EXPECT_STREQ(HealthStateName(HealthState::kHealthy), "Healthy");
  EXPECT_STREQ(HealthStateName(HealthState::kUnhealthy), "Unhealthy");
  EXPECT_STREQ(HealthStateName(HealthState::kUnmonitored), "Unmonitored");
  EXPECT_STREQ(HealthStateName(HealthState::kNotice), "Notice");
}

}  // namespace
}  // namespace nvdra::devices
