// The partitionable-device (KEP 4815) description of a GPU that dynamic MIG
// serves, as upstream publishes it: one counter set per GPU,
// "gpu-<minor>-counter-set", with a counter per capacity dimension (the
// largest value any MIG profile has) and one "memory-slice-<i>" counter per
// memory slice; the full GPU consumes all of it, a MIG placement its
// profile's capacities and its memory slices. The ledger holds memory
// slices by the names MemorySliceResource gives, so overlapping placements
// and the full GPU exclude each other whatever the scheduler decided.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "devices/device_info.h"
#include "model/published_device.h"

namespace nvdra::gpu {

// A Kubernetes quantity in BinarySI form, as upstream's
// resource.NewQuantity(n, resource.BinarySI) prints it: "14", "9984Mi", "79Gi".
std::string BinarySiQuantity(uint64_t n);

// A MIG profile's capacities (multiprocessors, copyEngines, decoders,
// encoders, jpegEngines, ofaEngines, memory), as quantities.
std::map<std::string, std::string> MigProfileCapacities(const devices::MigProfileInfo& profile);
// The largest value of each capacity over the GPU's MIG profiles.
std::map<std::string, std::string> MaxMigCapacities(const devices::GpuInfo& gpu);

std::string CounterSetName(const devices::GpuInfo& gpu);  // "gpu-0-counter-set"
model::CounterSet GpuCounterSet(const devices::GpuInfo& gpu);
// What a device consumes of the GPU's counter set: `capacities` (as
// counters: "copy-engines") and memory slices [start, start + size).
model::CounterConsumption Consumption(const devices::GpuInfo& gpu, const std::map<std::string, std::string>& capacities,
                                      int start, int size);

// The ledger's name of memory slice `i` of the GPU: "gpu-0 memory-slice-3".
std::string MemorySliceResource(int minor, int i);

}  // namespace nvdra::gpu
