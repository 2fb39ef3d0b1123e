// The ComputeDomain plugin's devices as upstream publishes them:
// daemon-0 and channel-<id>, each with attributes type and id.
#pragma once

#include <string_view>
#include <vector>

#include "model/published_device.h"

namespace nvdra::computedomain {

// Device types, as upstream names them in errors and metrics.
inline constexpr std::string_view kDeviceTypeChannel = "channel";
inline constexpr std::string_view kDeviceTypeDaemon = "daemon";

inline constexpr const char* kDaemonDeviceName = "daemon-0";

// daemon-0 and channel-0 .. channel-<channels-1>. Upstream publishes one
// channel (channel-0); more can be asked for.
// Without the daemon device when `daemon` is false (host-managed IMEX: no
// daemon claim can be prepared, so none is published, as upstream).
std::vector<model::PublishedDevice> ComputeDomainPublishedDevices(int channels = 1, bool daemon = true);

}  // namespace nvdra::computedomain
