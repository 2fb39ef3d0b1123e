// Tests only: a mock node for the GPU kind's tests, opened as the plugins
// open a device library.
#pragma once

#include <memory>
#include <string>

#include "devices/backends/open_device_lib.h"

namespace nvdra::gpu::testing {

// The built-in mock `profile` with its root at <dir>/mock, opened through
// OpenDeviceLib and discovered into `inventory`.
inline Status OpenMockNode(const std::string& profile, const std::string& dir, std::unique_ptr<devices::DeviceLib>& lib,
                           devices::NodeInventory& inventory) {
  devices::DeviceLibOptions o;
  o.mock_hardware = profile;
  o.mock_root = dir + "/mock";
  auto opened = devices::OpenDeviceLib(o);
  if (!opened.ok()) return opened.status();
  lib = std::move(opened).value();
  auto discovered = lib->Discover();
  if (!discovered.ok()) return discovered.status();
  inventory = std::move(discovered).value();
  return Status::Ok();
}

}  // namespace nvdra::gpu::testing
