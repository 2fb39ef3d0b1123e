// The node's boot id: state that does not survive a reboot (CDI files on
// tmpfs, device state) is tied to it.
#pragma once

#include <string>

#include "util/status.h"

namespace nvdra {

inline constexpr const char* kDefaultBootIdPath = "/proc/sys/kernel/random/boot_id";

// Reads and trims the boot id from `path` (overridable for tests).
Result<std::string> ReadBootId(const std::string& path = kDefaultBootIdPath);

}  // namespace nvdra
