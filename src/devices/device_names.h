// The names the hardware layer gives the devices it finds, as the upstream
// driver names them in ResourceSlices: gpu-<minor>, gpu-<minor>-mig-<profile>-
// <gi profile>-<placement> and channel-<id>. Health events and the mock's
// event file address devices by these names; what a device is published as
// (its type and attributes) belongs to its kind (gpu/, computedomain/).
#pragma once

#include <string>

#include "devices/device_info.h"

namespace nvdra::devices {

std::string GpuDeviceName(int minor);
std::string MigDeviceName(const MigDeviceInfo& mig);
std::string ImexChannelDeviceName(int channel);

// "1g.10gb+me" -> "1g10gb-me": dots dropped, lowercased, anything outside
// [a-z0-9-.] turned into '-', leading and trailing '-' trimmed.
std::string CanonicalMigProfile(const std::string& profile);

// The maximum IMEX channel id plus one (the kernel's channel count).
inline constexpr int kMaxImexChannels = 2048;

}  // namespace nvdra::devices
