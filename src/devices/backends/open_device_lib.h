// Picks the hardware backend at start: the mock (devices/mock/) when
// `options.mock_hardware` names a profile, else NVML (devices/nvml/). Above
// both backends, so neither they nor the device-library port know the other.
#pragma once

#include <memory>

#include "devices/device_lib.h"
#include "util/status.h"

namespace nvdra::devices {

Result<std::unique_ptr<DeviceLib>> OpenDeviceLib(const DeviceLibOptions& options);

}  // namespace nvdra::devices
