// JSON views of discovery results, for nvdra-discover and golden tests:
// the inventory as discovered and the devices as they would be published.
#pragma once

#include <string>
#include <vector>

#include "devices/device_info.h"
#include "model/published_device.h"

namespace nvdra::devices {

// {"inventory": {...}, "gpuDevices": [...], "computeDomainDevices": [...]},
// two-space indent, keys in a fixed order, trailing newline.
std::string RenderDiscoveryJson(const NodeInventory& inventory, const std::vector<model::PublishedDevice>& gpu_devices,
                                const std::vector<model::PublishedDevice>& compute_domain_devices);

// Published devices alone, in ResourceSlice "devices" shape (attributes as
// {"string"|"int"|"bool"|"version": value}, capacity as {"value": "..."}).
std::string RenderPublishedDevicesJson(const std::vector<model::PublishedDevice>& devices);

}  // namespace nvdra::devices
