// The canonical JSON of nvdra's config kinds (their rules are tested beside
// them: gpu/gpu_config_kinds_test.cc, computedomain/compute_domain_config_kinds_test.cc).
#include "config/opaque_config.h"

#include <gtest/gtest.h>

#include "cmd/config_kinds/config_kinds.h"
#include "computedomain/compute_domain_config_kinds.h"
#include "config/config_decoder.h"
#include "gpu/gpu_config_kinds.h"
#include "gpu/mig_config.h"
#include "gpu/mps_config.h"
#include "gpu/time_slicing_config.h"
#include "gpu/vfio_config.h"

namespace nvdra::config {
namespace {

using computedomain::ComputeDomainChannelConfig;
using computedomain::ComputeDomainDaemonConfig;
using gpu::GpuConfig;
using gpu::IommuConfig;
using gpu::MigDeviceConfig;
using gpu::MpsConfig;
using gpu::TimeSlicingConfig;
using gpu::VfioDeviceConfig;

[[maybe_unused]] const bool kOpaqueConfigTestKinds = RegisterNvdraConfigKinds().ok();

GpuConfig Sharing(std::string strategy) {
  GpuConfig c;
  c.sharing.emplace();
  c.sharing->strategy = std::move(strategy);
  return c;
}

TEST(OpaqueConfigTest, CanonicalJsonIsStableAndRoundTrips) {
  GpuConfig mps = Sharing("MPS");
  mps.sharing->Settings<MpsConfig>().emplace();
  mps.sharing->Settings<MpsConfig>()->default_active_thread_percentage = 50;
  mps.sharing->Settings<MpsConfig>()->default_pinned_device_memory_limit = *Quantity::Parse("10Gi");
  mps.sharing->Settings<MpsConfig>()->default_per_device_pinned_memory_limit["1"] = *Quantity::Parse("1Gi");
  mps.sharing->Settings<MpsConfig>()->default_per_device_pinned_memory_limit["0"] = *Quantity::Parse("2Gi");
  EXPECT_EQ(ToCanonicalJson(mps),
            R"({"kind":"GpuConfig","apiVersion":"resource.nvidia.com/v1beta1","sharing":{"strategy":"MPS",)"
            R"("mpsConfig":{"defaultActiveThreadPercentage":50,"defaultPinnedDeviceMemoryLimit":"10Gi",)"
            R"("defaultPerDevicePinnedMemoryLimit":{"0":"2Gi","1":"1Gi"}}}})");

  GpuConfig ts = Sharing("TimeSlicing");
  ts.sharing->Settings<TimeSlicingConfig>().emplace();
  MigDeviceConfig mig;
  mig.sharing.emplace();
  mig.sharing->strategy = "TimeSlicing";
  VfioDeviceConfig vfio;
  vfio.iommu = IommuConfig{"PreferIommuFD", true};
  const Config all[] = {GpuConfig{},
                        mps,
                        ts,
                        mig,
                        MigDeviceConfig{},
                        vfio,
                        VfioDeviceConfig{},
                        ComputeDomainChannelConfig{"uid", "All"},
                        ComputeDomainChannelConfig{"uid", ""},
                        ComputeDomainDaemonConfig{"uid"}};
  for (const Config& c : all) {
    std::string json = ToCanonicalJson(c);
    auto strict = DecodeStrict(json);
    ASSERT_TRUE(strict.ok()) << json << ": " << strict.status().ToString();
    EXPECT_EQ(*strict, c) << json;
    auto lenient = DecodeLenient(json);
    ASSERT_TRUE(lenient.ok()) << json;
    EXPECT_EQ(*lenient, c) << json;
    EXPECT_EQ(ToCanonicalJson(*lenient), json);
  }
  EXPECT_EQ(ToCanonicalJson(ComputeDomainDaemonConfig{"uid"}),
            R"({"kind":"ComputeDomainDaemonConfig","apiVersion":"resource.nvidia.com/v1beta1","domainID":"uid"})");
}

}  // namespace
}  // namespace nvdra::config
