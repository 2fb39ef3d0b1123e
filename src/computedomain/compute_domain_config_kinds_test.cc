// The ComputeDomain config kinds' defaults and rules.
#include "computedomain/compute_domain_config_kinds.h"

#include <gtest/gtest.h>

namespace nvdra::computedomain {
namespace {

using config::Config;
using config::FeatureGates;

[[maybe_unused]] const bool kComputeDomainConfigKindsRegistered = RegisterComputeDomainConfigKinds().ok();

std::string ValidateError(Config c, const FeatureGates& gates) {
  Normalize(c, gates);
  Status st = Validate(c, gates);
  return st.ok() ? "<ok>" : st.message();
}

TEST(OpaqueConfigTest, ComputeDomainConfigs) {
  EXPECT_EQ(ValidateError(ComputeDomainChannelConfig{}, FeatureGates()), "domainID cannot be empty");
  EXPECT_EQ(ValidateError(ComputeDomainDaemonConfig{}, FeatureGates()), "domainID cannot be empty");
  Config chan = ComputeDomainChannelConfig{"uid-1", ""};
  Normalize(chan, FeatureGates());
  EXPECT_EQ(chan.Get<ComputeDomainChannelConfig>().allocation_mode, "Single");
  EXPECT_EQ(ValidateError(ComputeDomainChannelConfig{"uid-1", "All"}, FeatureGates()), "<ok>");
  EXPECT_EQ(ValidateError(ComputeDomainChannelConfig{"uid-1", "Many"}, FeatureGates()),
            "unknown allocationMode: Many, supported allocation modes: Single, All");
}

}  // namespace
}  // namespace nvdra::computedomain
