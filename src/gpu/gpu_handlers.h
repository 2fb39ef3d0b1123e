// Where the GPU kind's device types and sharing strategies are registered:
// adding one is a new file plus one line in gpu_handlers.cc.
#pragma once

#include <memory>
#include <vector>

#include "devices/device_info.h"
#include "gpu/gpu_device_type.h"
#include "gpu/sharing_strategy.h"
#include "gpu/time_slice_resets.h"

namespace nvdra::gpu {

// Every device type, in the order their defaults are listed (lowest
// precedence first).
const std::vector<std::unique_ptr<GpuDeviceType>>& RegisteredDeviceTypes();

// What a strategy may use; all of it outlives the strategies.
struct SharingContext {
  TimeSliceResets& resets;
  const devices::NodeInventory& inventory;
};

// Every sharing strategy a config may name.
std::vector<std::unique_ptr<SharingStrategy>> RegisteredSharingStrategies(const SharingContext& context);

}  // namespace nvdra::gpu
