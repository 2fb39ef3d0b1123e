// NVIDIA capability ("nvcaps") files under /proc/driver/nvidia/capabilities:
// each <cap>/access file names the minor and mode of the device node
// /dev/nvidia-caps/nvidia-cap<minor> that grants the capability (a MIG GPU or
// compute instance, or fabric-imex-mgmt).
#pragma once

#include <cstdint>
#include <string>

#include "util/status.h"

namespace nvdra::devices {

struct NvcapAccess {
  int minor = 0;
  uint32_t mode = 0;  // DeviceFileMode, e.g. 0444
};

// Parses "DeviceFileMinor: N" and "DeviceFileMode: M" lines (decimal).
Result<NvcapAccess> ParseNvcapAccess(const std::string& text);
Result<NvcapAccess> ReadNvcapAccess(const std::string& path);

// "<caps root>/gpu<minor>/mig/gi<gi>/access" and ".../ci<ci>/access"
// relative to /proc/driver/nvidia/capabilities.
std::string MigGiAccessPath(int gpu_minor, int gi);
std::string MigCiAccessPath(int gpu_minor, int gi, int ci);
inline constexpr const char* kCapabilitiesDir = "/proc/driver/nvidia/capabilities";
inline constexpr const char* kFabricImexMgmtCap = "fabric-imex-mgmt";

}  // namespace nvdra::devices
