// What a device kind builds its containers' edits from: the checked device
// nodes of the driver root and, when the plugin attaches them, the driver's
// files (libraries, binaries, firmware, hooks; null: device nodes only).
#pragma once

#include <memory>

#include "devices/device_lib.h"
#include "devices/device_nodes.h"
#include "devices/toolkit/driver_files.h"

namespace nvdra::devices {

struct ContainerSources {
  DeviceNodes nodes;
  std::shared_ptr<DriverFilesCache> driver_files;

  // The paths `lib` uses.
  static ContainerSources ForLib(const DeviceLib& lib, std::shared_ptr<DriverFilesCache> driver_files = nullptr) {
    return {DeviceNodes::ForLib(lib), std::move(driver_files)};
  }
};

}  // namespace nvdra::devices
