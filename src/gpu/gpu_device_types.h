// The GPU kind's device types, as upstream names them in errors, metrics
// and the published `type` attribute.
#pragma once

#include <string_view>

namespace nvdra::gpu {

inline constexpr const char* kDriverName = "gpu.nvidia.com";

inline constexpr std::string_view kDeviceTypeGpu = "gpu";
inline constexpr std::string_view kDeviceTypeMig = "mig";
inline constexpr std::string_view kDeviceTypeVfio = "vfio";

}  // namespace nvdra::gpu
