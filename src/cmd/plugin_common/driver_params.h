// maskNvidiaDriverParams (MASK_NVIDIA_DRIVER_PARAMS=true): before NVML starts,
// the plugin puts a copy of the driver's params file with
// `ModifyDeviceFiles: 0` over /proc/driver/nvidia/params in its container's
// mount namespace, as upstream's containers do with cp, sed and mount before
// they exec the plugin. NVML then creates no /dev/nvidia* node for a GPU the
// container was not given (nvkind's worker "nodes" have cgroup access to every
// GPU but device nodes for theirs alone). nvdra's image has no shell, so the
// plugin does it itself.
#pragma once

#include <optional>
#include <string>

#include "util/status.h"

namespace nvdra::plugin {

inline constexpr const char* kDriverParamsPath = "/proc/driver/nvidia/params";

// `params` with the line "ModifyDeviceFiles: 1" turned into
// "ModifyDeviceFiles: 0"; nullopt when there is no such line (already 0, or
// a driver without the setting): nothing to mask.
std::optional<std::string> ParamsWithDeviceFilesUnmodified(const std::string& params);

// What MaskDriverParams did.
enum class MaskResult { kMasked, kNoDriver, kAlreadyMasked };

// Writes the rewritten copy of `params_path` to `copy_path` (read-only) and
// bind-mounts it over `params_path`. No driver (no params file) and a file
// that already says 0 are no errors; a failed mount is.
Result<MaskResult> MaskDriverParams(const std::string& params_path, const std::string& copy_path);

}  // namespace nvdra::plugin
