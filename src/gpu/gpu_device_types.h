// The GPU kind's driver name and its whole-GPU device type, as upstream
// names them in errors, metrics and the published `type` attribute. Every
// other type's name is its plug-in's own (gpu_handlers.cc lists them).
#pragma once

#include <string_view>

namespace nvdra::gpu {

inline constexpr const char* kDriverName = "gpu.nvidia.com";

inline constexpr std::string_view kDeviceTypeGpu = "gpu";

}  // namespace nvdra::gpu
