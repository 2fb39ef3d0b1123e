// The GPU config kinds' defaults and rules, with upstream's messages.
#include "gpu/gpu_config_kinds.h"

#include <gtest/gtest.h>

#include "config/config_decoder.h"
#include "config/feature_gates.h"
#include "gpu/mig_config.h"
#include "gpu/mps_config.h"
#include "gpu/time_slicing_config.h"
#include "gpu/vfio_config.h"

namespace nvdra::gpu {
namespace {

using config::Config;
using config::DecodeStrict;
using config::FeatureGates;
using config::Gate;
using config::Quantity;

[[maybe_unused]] const bool kGpuConfigKindsRegistered = RegisterGpuConfigKinds().ok();

const FeatureGates kTimeSlicingGates = FeatureGates().With(Gate::kTimeSlicingSettings, true);
const FeatureGates kMps = FeatureGates().With(Gate::kMPSSupport, true);
const FeatureGates kBoth = kTimeSlicingGates.With(Gate::kMPSSupport, true);

GpuConfig Sharing(std::string strategy) {
  GpuConfig c;
  c.sharing.emplace();
  c.sharing->strategy = std::move(strategy);
  return c;
}

std::string ValidateError(Config c, const FeatureGates& gates) {
  Normalize(c, gates);
  Status st = Validate(c, gates);
  return st.ok() ? "<ok>" : st.message();
}

TEST(OpaqueConfigTest, SharingStrategiesNeedTheirGates) {
  EXPECT_EQ(ValidateError(Sharing("TimeSlicing"), FeatureGates()),
            "\"TimeSlicing\" is selected as the GPU sharing strategy, but the \"TimeSlicingSettings\" feature gate is "
            "not enabled");
  EXPECT_EQ(ValidateError(Sharing("MPS"), kTimeSlicingGates),
            "\"MPS\" is selected as the GPU sharing strategy, but the \"MPSSupport\" feature gate is not enabled");
  EXPECT_EQ(ValidateError(Sharing("Fabric"), kBoth),
            "unknown GPU sharing strategy: Fabric, supported GPU sharing strategies: TimeSlicing, MPS");
  EXPECT_EQ(ValidateError(Sharing(""), kBoth),
            "unknown GPU sharing strategy: , supported GPU sharing strategies: TimeSlicing, MPS");
  EXPECT_EQ(ValidateError(Sharing("TimeSlicing"), kTimeSlicingGates), "<ok>");
  EXPECT_EQ(ValidateError(Sharing("MPS"), kMps), "<ok>");
  EXPECT_EQ(ValidateError(GpuConfig{}, FeatureGates()), "<ok>");

  MigDeviceConfig mig;
  mig.sharing.emplace();
  mig.sharing->strategy = "TimeSlicing";
  EXPECT_NE(ValidateError(mig, FeatureGates()).find("\"TimeSlicingSettings\" feature gate is not enabled"),
            std::string::npos);
  EXPECT_EQ(ValidateError(mig, kTimeSlicingGates), "<ok>");
}

TEST(OpaqueConfigTest, NormalizeFillsTheTimeSliceIntervalEvenForAnEmptyBlock) {
  // `timeSlicingConfig: {}` crashes the Go driver; here it means Default.
  for (
      const char* json : {
          R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{}}})",
          R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing"}})",
      }) {
    auto c = DecodeStrict(json);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    Normalize(*c, kTimeSlicingGates);
    EXPECT_TRUE(Validate(*c, kTimeSlicingGates).ok());
    const auto& g = c->Get<GpuConfig>();
    ASSERT_TRUE(g.sharing->Settings<TimeSlicingConfig>().has_value());
    EXPECT_EQ(g.sharing->Settings<TimeSlicingConfig>()->interval, "Default");
    EXPECT_EQ(TimeSliceOf(g), TimeSliceInterval::kDefault);
  }
  // Without the gate Normalize leaves the config alone for Validate to reject.
  Config off = Sharing("TimeSlicing");
  Normalize(off, FeatureGates());
  EXPECT_FALSE(off.Get<GpuConfig>().sharing->Settings<TimeSlicingConfig>().has_value());
}

TEST(OpaqueConfigTest, TimeSliceIntervals) {
  GpuConfig c = Sharing("TimeSlicing");
  c.sharing->Settings<TimeSlicingConfig>().emplace();
  c.sharing->Settings<TimeSlicingConfig>()->interval = "Forever";
  EXPECT_EQ(ValidateError(c, kTimeSlicingGates),
            "unknown time-slice interval: Forever, supported time-slice intervals: Default, Short, Medium, Long");
  c.sharing->Settings<TimeSlicingConfig>()->interval = "long";  // case matters
  EXPECT_NE(ValidateError(c, kTimeSlicingGates), "<ok>");
  for (auto [name, value] : {std::pair{"Default", 0}, {"Short", 1}, {"Medium", 2}, {"Long", 3}}) {
    auto i = ParseTimeSliceInterval(name);
    ASSERT_TRUE(i.has_value()) << name;
    EXPECT_EQ(static_cast<int>(*i), value);
    EXPECT_EQ(TimeSliceIntervalName(*i), name);
  }
}

TEST(OpaqueConfigTest, StrategyAndSettingsMustAgree) {
  GpuConfig ts = Sharing("TimeSlicing");
  ts.sharing->Settings<MpsConfig>().emplace();
  EXPECT_EQ(ValidateError(ts, kBoth), "cannot use MpsConfig with the 'TimeSlicing' strategy");
  GpuConfig mps = Sharing("MPS");
  mps.sharing->Settings<TimeSlicingConfig>().emplace();
  EXPECT_EQ(ValidateError(mps, kBoth), "cannot use TimeSlicingConfig with the 'MPS' strategy");
}

TEST(OpaqueConfigTest, MpsLimits) {
  GpuConfig c = Sharing("MPS");
  c.sharing->Settings<MpsConfig>().emplace();
  c.sharing->Settings<MpsConfig>()->default_active_thread_percentage = -1;
  EXPECT_EQ(ValidateError(c, kMps), "active thread percentage must not be negative");
  c.sharing->Settings<MpsConfig>()->default_active_thread_percentage = 101;
  EXPECT_EQ(ValidateError(c, kMps), "active thread percentage must not be greater than 100");
  c.sharing->Settings<MpsConfig>()->default_active_thread_percentage = 100;
  EXPECT_EQ(ValidateError(c, kMps), "<ok>");
  c.sharing->Settings<MpsConfig>()->default_pinned_device_memory_limit = *Quantity::Parse("512Ki");
  EXPECT_EQ(ValidateError(c, kMps), "invalid limit: default value set too low: 512Ki");
  c.sharing->Settings<MpsConfig>()->default_pinned_device_memory_limit = *Quantity::Parse("2Gi");
  c.sharing->Settings<MpsConfig>()->default_per_device_pinned_memory_limit["1"] = *Quantity::Parse("10");
  EXPECT_EQ(ValidateError(c, kMps), "invalid limit: value set too low: 1: 10");

  MpsConfig m;
  m.default_pinned_device_memory_limit = *Quantity::Parse("2Gi");
  m.default_per_device_pinned_memory_limit["1"] = *Quantity::Parse("1Gi");
  m.default_per_device_pinned_memory_limit["GPU-b"] = *Quantity::Parse("3Gi");
  auto limits = m.PinnedLimitsFor({"GPU-a", "GPU-b"});
  ASSERT_TRUE(limits.ok()) << limits.status().ToString();
  EXPECT_EQ(limits->at("GPU-a"), "2048M");
  EXPECT_EQ(limits->at("GPU-b"), "3072M");  // the UUID key is applied after the index key "1"
  m.default_per_device_pinned_memory_limit["7"] = *Quantity::Parse("1Gi");
  EXPECT_EQ(m.PinnedLimitsFor({"GPU-a", "GPU-b"}).status().message(), "invalid device: invalid device index: 7");
  m.default_per_device_pinned_memory_limit.erase("7");
  m.default_per_device_pinned_memory_limit["GPU-zzz"] = *Quantity::Parse("1Gi");
  EXPECT_EQ(m.PinnedLimitsFor({"GPU-a", "GPU-b"}).status().message(),
            "invalid device: unable to parse key as an integer: GPU-zzz");
}

TEST(OpaqueConfigTest, VfioDefaultsAndPolicies) {
  Config c = VfioDeviceConfig{};
  Normalize(c, FeatureGates());
  const auto& v = c.Get<VfioDeviceConfig>();
  ASSERT_TRUE(v.iommu.has_value());
  EXPECT_EQ(v.iommu->backend_policy, "LegacyOnly");
  EXPECT_EQ(v.iommu->enable_api_device, false);
  VfioDeviceConfig bad;
  bad.iommu.emplace();
  bad.iommu->backend_policy = "IommuFDOnly";
  EXPECT_EQ(ValidateError(bad, FeatureGates()),
            "unknown IOMMU backend policy: IommuFDOnly, supported IOMMU backend policies: LegacyOnly, PreferIommuFD");
}

}  // namespace
}  // namespace nvdra::gpu
