// The GPU kind's devices as the upstream driver publishes them in
// ResourceSlices, built from a NodeInventory; each device type
// (gpu_device_type.h) publishes its own attributes and capacities on top
// of the common ones here.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/feature_gates.h"
#include "devices/device_info.h"
#include "model/published_device.h"
#include "util/status.h"

namespace nvdra::gpu {

// Coerces a driver-style version into the semantic version upstream
// publishes: "570.158.01" -> "570.158.1", "9.0" -> "9.0.0".
Result<std::string> NormalizeVersion(const std::string& v);

// The attributes every GPU-backed device carries (productName, brand,
// architecture, versions, PCI bus id and root, NUMA node, addressing mode),
// and its sort key (the PCI bus id).
void PutCommonGpuAttributes(model::PublishedDevice& d, const devices::GpuInfo& g);

inline constexpr std::string_view kNumaNodeAttribute = "resource.kubernetes.io/numaNode";

// With DRAListTypeAttributes, as upstream: the NUMA node in its list form
// ({"ints": [n]}, KEP 6072's preferred form; one element, the GPU's own
// node). Without the gate, or without the attribute, nothing changes.
void ApplyListTypeAttributes(model::PublishedDevice& d, const config::FeatureGates& gates);

// Sorts by PCI bus id, then name: the order of the slice.
void SortByBusId(std::vector<model::PublishedDevice>& devices);

// The devices of every device type the gates switch on (gpu_handlers.h), as
// each type publishes them. Sorted by PCI bus id, then name.
std::vector<model::PublishedDevice> GpuPublishedDevices(const devices::NodeInventory& inv,
                                                        const config::FeatureGates& gates = {});

}  // namespace nvdra::gpu
