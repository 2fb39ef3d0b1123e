// VfioDeviceConfig, the config kind of GPUs passed through to a VM
// (vfio_type.h): upstream's shape, its defaults, rules and canonical JSON.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "config/config_kind.h"

namespace nvdra::gpu {

inline constexpr std::string_view kVfioDeviceConfigKind = "VfioDeviceConfig";

inline constexpr std::string_view kIommuLegacyOnly = "LegacyOnly";
inline constexpr std::string_view kIommuPreferIommuFD = "PreferIommuFD";

struct IommuConfig {
  std::string backend_policy;
  std::optional<bool> enable_api_device;
  friend bool operator==(const IommuConfig&, const IommuConfig&) = default;
};

struct VfioDeviceConfig {
  std::optional<IommuConfig> iommu;
  static const config::ConfigKind& Kind();
  friend bool operator==(const VfioDeviceConfig&, const VfioDeviceConfig&) = default;
};

}  // namespace nvdra::gpu
