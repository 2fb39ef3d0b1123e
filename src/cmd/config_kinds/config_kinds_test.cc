// The programs' registration: every config kind of both device kinds, in the
// order the decoder's messages list them, each under the driver of the
// device kind whose rules name it.
#include "cmd/config_kinds/config_kinds.h"

#include <gtest/gtest.h>

#include "computedomain/compute_domain_kind.h"
#include "config/config_decoder.h"
#include "config/config_kind.h"
#include "gpu/gpu_kind.h"

namespace nvdra {
namespace {

TEST(NvdraConfigKindsTest, BothKindsConfigKindsAreRegisteredInOneOrder) {
  ASSERT_TRUE(RegisterNvdraConfigKinds().ok());
  ASSERT_TRUE(RegisterNvdraConfigKinds().ok());  // again: nothing changes
  std::vector<std::string> names;
  for (const config::ConfigKind* k : config::RegisteredConfigKinds()) {
    names.push_back(k->kind);
    EXPECT_EQ(k->api_version, config::kApiVersion);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"GpuConfig", "MigDeviceConfig", "VfioDeviceConfig",
                                             "ComputeDomainChannelConfig", "ComputeDomainDaemonConfig"}));
  EXPECT_EQ(
      config::DecodeStrict(R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":"ComputeDomain"})").status().message(),
      "no kind \"ComputeDomain\" is registered for version \"resource.nvidia.com/v1beta1\"; known kinds: "
      "GpuConfig, MigDeviceConfig, VfioDeviceConfig, ComputeDomainChannelConfig, ComputeDomainDaemonConfig");
  EXPECT_EQ(config::DecodeStrict(R"({"apiVersion":"resource.nvidia.com/v1","kind":"GpuConfig"})").status().message(),
            "no kind \"GpuConfig\" is registered for version \"resource.nvidia.com/v1\"; opaque configs of this driver "
            "use apiVersion \"resource.nvidia.com/v1beta1\"");
}

TEST(NvdraConfigKindsTest, EveryKindARuleNamesIsRegisteredUnderThatRulesDriver) {
  ASSERT_TRUE(RegisterNvdraConfigKinds().ok());
  const auto all = *config::FeatureGates::Parse("AllAlpha=true,AllBeta=true");
  size_t named = 0;
  for (const config::DriverConfigRules& rules : {gpu::GpuConfigRules(all), computedomain::ComputeDomainConfigRules()}) {
    for (const config::DeviceTypeRule& rule : rules.device_types) {
      const config::ConfigKind* kind = config::FindConfigKind(config::kApiVersion, rule.config_kind);
      ASSERT_NE(kind, nullptr) << rule.config_kind;
      EXPECT_EQ(kind->driver, rules.driver) << rule.config_kind;
      ++named;
    }
    for (const config::Config& d : rules.defaults) {
      ASSERT_NE(d.kind(), nullptr);
      EXPECT_EQ(d.kind()->driver, rules.driver) << config::KindOf(d);
    }
  }
  EXPECT_GE(named, 5u);
  EXPECT_EQ(gpu::GpuConfig::Kind().driver, gpu::kDriverName);
  EXPECT_EQ(computedomain::ComputeDomainChannelConfig::Kind().driver, computedomain::kDriverName);
}

}  // namespace
}  // namespace nvdra
