// The ComputeDomain kind's opaque config kinds, of compute-domain.nvidia.com
// and group/version `resource.nvidia.com/v1beta1`: ComputeDomainChannelConfig
// and ComputeDomainDaemonConfig, their defaults, rules and canonical JSON,
// defined here beside the kind and registered with the config decoder
// (config/config_kind.h) by RegisterComputeDomainConfigKinds.
#pragma once

#include <string>
#include <string_view>

#include "config/opaque_config.h"
#include "util/status.h"

namespace nvdra::computedomain {

inline constexpr std::string_view kComputeDomainChannelConfigKind = "ComputeDomainChannelConfig";
inline constexpr std::string_view kComputeDomainDaemonConfigKind = "ComputeDomainDaemonConfig";

inline constexpr std::string_view kAllocationModeSingle = "Single";
inline constexpr std::string_view kAllocationModeAll = "All";

struct ComputeDomainChannelConfig {
  std::string domain_id;        // the ComputeDomain's UID
  std::string allocation_mode;  // "Single" (one channel) or "All"
  static const config::ConfigKind& Kind();
  friend bool operator==(const ComputeDomainChannelConfig&, const ComputeDomainChannelConfig&) = default;
};

struct ComputeDomainDaemonConfig {
  std::string domain_id;
  static const config::ConfigKind& Kind();
  friend bool operator==(const ComputeDomainDaemonConfig&, const ComputeDomainDaemonConfig&) = default;
};

// Registers the two kinds with the config decoder (the channel's, then the
// daemon's). An empty allocationMode means "Single"; both need a domainID
// ("domainID cannot be empty").
Status RegisterComputeDomainConfigKinds();

}  // namespace nvdra::computedomain
