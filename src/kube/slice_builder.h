// Turns the node's device inventory into ResourceSlice specs: sorted,
// chunked and encoded the same way every time, so an unchanged inventory
// yields byte-identical specs and no API writes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/published_device.h"

namespace nvdra::kube {

inline constexpr size_t kMaxDevicesPerSlice = 128;
// The API allows fewer devices per slice when any of them has taints.
inline constexpr size_t kMaxDevicesPerSliceWithTaints = 64;

// Devices sorted by sort_key (PCI bus id), then name; split into slices.
std::vector<std::vector<model::PublishedDevice>> ChunkDevices(std::vector<model::PublishedDevice> devices);

// One device in the shape of `api_version` ("v1", "v1beta2", "v1beta1";
// v1beta1 nests attributes, capacity, taints and allowMultipleAllocations
// under "basic"). Capacity request policies and allowMultipleAllocations
// (consumable capacity, Kubernetes 1.34) have the same shape in all three.
nlohmann::json EncodeDevice(const model::PublishedDevice& device, const std::string& api_version);

struct PoolRef {
  std::string name;
  int64_t generation = 1;
  int64_t slice_count = 1;
};

// The spec of one slice of this node's pool.
nlohmann::json BuildSliceSpec(const std::string& driver, const std::string& node, const PoolRef& pool,
                              const std::vector<model::PublishedDevice>& devices, const std::string& api_version);

}  // namespace nvdra::kube
