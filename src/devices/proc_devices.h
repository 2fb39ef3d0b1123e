// Character-device major numbers from /proc/devices (or a file standing in
// for it). Majors of nvidia-caps and nvidia-caps-imex-channels are assigned
// at module load and can change across reboots, so callers read them fresh
// and never reuse one stored earlier.
#pragma once

#include <map>
#include <string>

#include "util/status.h"

namespace nvdra::devices {

// name -> major for the "Character devices:" section of `text`.
std::map<std::string, int> ParseCharDeviceMajors(const std::string& text);

// Reads `path` and returns the major of `name`; NotFound when the driver
// module that registers it is not loaded.
Result<int> ReadCharDeviceMajor(const std::string& path, const std::string& name);

}  // namespace nvdra::devices
