// Where the GPU kind's device types and sharing strategies are registered:
// adding one is a new file plus one line in gpu_handlers.cc.
#pragma once

#include <memory>
#include <vector>

#include "config/feature_gates.h"
#include "devices/device_info.h"
#include "devices/gpu_control.h"
#include "devices/pci_driver_control.h"
#include "gpu/consumable_shares.h"
#include "gpu/gpu_device_type.h"
#include "gpu/mps_strategy.h"
#include "gpu/sharing_strategy.h"
#include "gpu/time_slice_resets.h"
#include "gpu/vfio_type.h"

namespace nvdra::gpu {

// What a device type with node-side work may use; outlives the types.
// Null where only the types' names and configs are asked for.
struct DeviceTypeContext {
  const devices::NodeInventory* inventory = nullptr;
  devices::GpuControl* control = nullptr;
  // Passthrough: the PCI drivers, and whether /dev/iommu exists.
  devices::PciDriverControl* pci = nullptr;
  bool iommufd_enabled = false;
  // --host-root and the rest passthrough needs from the node.
  const PassthroughHost* passthrough = nullptr;
};

// The device types the gates switch on, in the order their defaults are
// listed (lowest precedence first). No two serve the same type name.
std::vector<std::unique_ptr<GpuDeviceType>> RegisteredDeviceTypes(const config::FeatureGates& gates,
                                                                  const DeviceTypeContext& context = {});

// What a strategy may use; all of it outlives the strategies.
struct SharingContext {
  TimeSliceResets& resets;
  const devices::NodeInventory& inventory;
  devices::GpuControl& control;
  const MpsRuntime& mps;
  // Whether devices may be shared by several claims (--consumable-shares).
  const ConsumableShares& consumable_shares;
  // Null when they may not.
  const DeviceSharedWithOthers& shared_with_others;
};

// Every sharing strategy a config may name.
std::vector<std::unique_ptr<SharingStrategy>> RegisteredSharingStrategies(const SharingContext& context);

}  // namespace nvdra::gpu
