#include "gpu/health_taints.h"

#include <gtest/gtest.h>

namespace nvdra::gpu {
namespace {

std::vector<model::PublishedDevice> Devices() {
  model::PublishedDevice a, b;
  a.name = "gpu-0";
  b.name = "gpu-1";
  return {a, b};
}

TEST(HealthTaintsTest, CriticalXidTaintsOnlyThatDevice) {
  HealthTaints t;
  EXPECT_TRUE(t.Apply({"gpu-1", devices::HealthState::kUnhealthy, 79, "XID 79"}));
  EXPECT_FALSE(t.Apply({"gpu-1", devices::HealthState::kUnhealthy, 79, "XID 79"}));
  auto d = t.Decorate(Devices());
  EXPECT_TRUE(d[0].taints.empty());
  ASSERT_EQ(d[1].taints.size(), 1u);
  EXPECT_EQ(d[1].taints[0], (model::DeviceTaint{"gpu.nvidia.com/xid", "79", "NoSchedule"}));
}

TEST(HealthTaintsTest, LostAndUnmonitoredUseUpstreamKeys) {
  HealthTaints t;
  t.Apply({"gpu-0", devices::HealthState::kUnhealthy, std::nullopt, "GPU lost"});
  t.Apply({"gpu-1", devices::HealthState::kUnmonitored, std::nullopt, ""});
  auto d = t.Decorate(Devices());
  EXPECT_EQ(d[0].taints[0].key, "gpu.nvidia.com/gpu-lost");
  EXPECT_EQ(d[1].taints[0], (model::DeviceTaint{"gpu.nvidia.com/unmonitored", "", "None"}));
}

TEST(HealthTaintsTest, RecoveryClearsTheTaint) {
  HealthTaints t;
  t.Apply({"gpu-0", devices::HealthState::kUnhealthy, 48, ""});
  EXPECT_TRUE(t.Apply({"gpu-0", devices::HealthState::kHealthy, std::nullopt, ""}));
  EXPECT_FALSE(t.Apply({"gpu-0", devices::HealthState::kHealthy, std::nullopt, ""}));
  EXPECT_TRUE(t.Decorate(Devices())[0].taints.empty());
}

TEST(HealthTaintsTest, IgnoredXidNeverClearsNorDowngradesACriticalOne) {
  HealthTaints t;
  ASSERT_TRUE(t.Apply({"gpu-0", devices::HealthState::kUnhealthy, 79, "XID 79 (critical)"}));
  EXPECT_FALSE(t.Apply({"gpu-0", devices::HealthState::kNotice, 13, "XID 13 (ignored)"}));
  auto d = t.Decorate(Devices());
  EXPECT_EQ(d[0].taints, (std::vector<model::DeviceTaint>{{"gpu.nvidia.com/xid", "79", "NoSchedule"}}));
  // A later critical XID replaces the value, as upstream's one taint per key.
  EXPECT_TRUE(t.Apply({"gpu-0", devices::HealthState::kUnhealthy, 48, "XID 48 (critical)"}));
  EXPECT_EQ(t.Decorate(Devices())[0].taints,
            (std::vector<model::DeviceTaint>{{"gpu.nvidia.com/xid", "48", "NoSchedule"}}));
}

TEST(HealthTaintsTest, IgnoredXidOnAHealthyDeviceIsAnInformationalTaint) {
  HealthTaints t;
  EXPECT_TRUE(t.Apply({"gpu-1", devices::HealthState::kNotice, 13, "XID 13 (ignored)"}));
  EXPECT_FALSE(t.Apply({"gpu-1", devices::HealthState::kNotice, 13, "XID 13 (ignored)"}));
  EXPECT_TRUE(t.Apply({"gpu-1", devices::HealthState::kNotice, 31, "XID 31 (ignored)"}));
  EXPECT_EQ(t.Decorate(Devices())[1].taints, (std::vector<model::DeviceTaint>{{"gpu.nvidia.com/xid", "31", "None"}}));
  // A critical XID after it takes over the key with NoSchedule.
  EXPECT_TRUE(t.Apply({"gpu-1", devices::HealthState::kUnhealthy, 79, "XID 79 (critical)"}));
  EXPECT_EQ(t.Decorate(Devices())[1].taints,
            (std::vector<model::DeviceTaint>{{"gpu.nvidia.com/xid", "79", "NoSchedule"}}));
  EXPECT_TRUE(t.Decorate(Devices())[0].taints.empty());
}

TEST(HealthTaintsTest, OneTaintPerKeyAndRecoveryClearsThemAll) {
  HealthTaints t;
  t.Apply({"gpu-0", devices::HealthState::kUnmonitored, std::nullopt, ""});
  t.Apply({"gpu-0", devices::HealthState::kUnhealthy, 79, ""});
  t.Apply({"gpu-0", devices::HealthState::kUnhealthy, std::nullopt, "GPU lost"});
  EXPECT_EQ(t.Decorate(Devices())[0].taints, (std::vector<model::DeviceTaint>{
                                                 {"gpu.nvidia.com/gpu-lost", "", "NoSchedule"},
                                                 {"gpu.nvidia.com/unmonitored", "", "None"},
                                                 {"gpu.nvidia.com/xid", "79", "NoSchedule"},
                                             }));
  EXPECT_TRUE(t.Apply({"gpu-0", devices::HealthState::kHealthy, std::nullopt, "recovered"}));
  EXPECT_TRUE(t.Decorate(Devices())[0].taints.empty());
}

}  // namespace
}  // namespace nvdra::gpu
