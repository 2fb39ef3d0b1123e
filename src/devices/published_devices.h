// Device names, attributes and capacities as the upstream driver publishes
// them in ResourceSlices (gpu-<minor>, gpu-<minor>-mig-<profile>-<gi
// profile>-<placement>, channel-<id>, daemon-0), built from a NodeInventory.
#pragma once

#include <string>
#include <vector>

#include "devices/device_info.h"
#include "model/published_device.h"
#include "util/status.h"

namespace nvdra::devices {

std::string GpuDeviceName(int minor);
std::string MigDeviceName(const MigDeviceInfo& mig);
std::string ImexChannelDeviceName(int channel);
inline constexpr const char* kDaemonDeviceName = "daemon-0";

// "1g.10gb+me" -> "1g10gb-me": dots dropped, lowercased, anything outside
// [a-z0-9-.] turned into '-', leading and trailing '-' trimmed.
std::string CanonicalMigProfile(const std::string& profile);

// Coerces a driver-style version into the semantic version upstream
// publishes: "570.158.01" -> "570.158.1", "9.0" -> "9.0.0".
Result<std::string> NormalizeVersion(const std::string& v);

// Full GPUs (MIG disabled) as gpu-<minor>, and the existing MIG devices of
// MIG-enabled GPUs. Sorted by PCI bus id, then name.
std::vector<model::PublishedDevice> GpuPublishedDevices(const NodeInventory& inv);

// daemon-0 and channel-0 .. channel-<channels-1> with attributes type and id.
// Upstream publishes one channel (channel-0); more can be asked for.
std::vector<model::PublishedDevice> ComputeDomainPublishedDevices(int channels = 1);

// The maximum IMEX channel id plus one (the kernel's channel count).
inline constexpr int kMaxImexChannels = 2048;

}  // namespace nvdra::devices
