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

// One slice's content: counter sets and devices (either may be empty).
struct SliceContent {
  std::vector<model::CounterSet> counter_sets;
  std::vector<model::PublishedDevice> devices;
};

// The pool's slices. Devices without counters: ChunkDevices. When some
// consume counters (partitionable devices), one slice per sort key (a GPU
// and its partitions), as upstream; the counter sets either in one slice
// of their own, first (`counters_in_own_slice`, API servers 1.35 and newer),
// or in the slice of the devices that consume them.
std::vector<SliceContent> ChunkSlices(std::vector<model::PublishedDevice> devices, bool counters_in_own_slice);

// Whether an API server of this /version gitVersion ("v1.35.2") wants
// counter sets in slices of their own (1.35 and newer). Unparsable: no.
bool CounterSetsInOwnSlice(const std::string& git_version);

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
// The same with counter sets ("sharedCounters"); a slice of counter sets
// alone has no "devices".
nlohmann::json BuildSliceSpec(const std::string& driver, const std::string& node, const PoolRef& pool,
                              const SliceContent& content, const std::string& api_version);

}  // namespace nvdra::kube
