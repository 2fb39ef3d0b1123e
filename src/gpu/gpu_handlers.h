// Where the GPU kind's plug-ins are registered (claim_feature.h): the device
// types, the sharing strategies, consumable shares and Fabric Manager
// partitions, in one list with the gate that enables each, with their
// decorations of whole GPUs and their parts of the Go driver's checkpoint.
// With gpu_undo_pieces.cc, the one place outside a plug-in's own files that
// names the features (docs/architecture.md). Adding one is
// its own files plus one entry in gpu_handlers.cc (and, with a piece of the
// undo record, one in gpu_undo_pieces.cc).
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "config/feature_gates.h"
#include "devices/device_info.h"
#include "devices/gpu_control.h"
#include "devices/pci_driver_control.h"
#include "gpu/claim_feature.h"
#include "gpu/consumable_shares.h"
#include "gpu/fabric_partitions.h"
#include "gpu/gpu_checkpoint_codec.h"
#include "gpu/gpu_device_type.h"
#include "gpu/gpu_undo_pieces.h"
#include "gpu/mps_strategy.h"
#include "gpu/sharing_strategy.h"
#include "gpu/time_slice_resets.h"
#include "gpu/vfio_type.h"
#include "util/periodic_worker.h"

namespace nvdra::gpu {

// What the plug-ins need from the plugin's flags and the node.
struct GpuFeatureOptions {
  // Bounded retries of a failing time-slice reset (time_slice_resets.h).
  TimeSliceResetOptions resets;
  // How often a GPU that owes a time-slice reset is retried.
  std::chrono::milliseconds reset_retry_period{30'000};
  // The thread that runs the plug-ins' own periodic work (the plugin's
  // background group, which must outlive the kind); null: a thread each.
  PeriodicGroup* background = nullptr;
  // MPS control daemons (mps_strategy.h); without an api, MPS claims fail.
  MpsRuntime mps;
  // --consumable-shares: whether GPUs and MIG devices are published for
  // sharing and claims may hold shares of them (consumable_shares.h).
  ConsumableShares consumable_shares;
  // Whether another claim still holds a share of a device (from the ledger);
  // used only while consumable sharing is on.
  DeviceSharedWithOthers shared_with_others;
  // Passthrough (PassthroughSupport): the PCI drivers, through sysfs;
  // outlives the kind. Null: passthrough claims fail.
  devices::PciDriverControl* pci = nullptr;
  // What passthrough needs beyond sysfs (vfio_type.h).
  PassthroughHost passthrough;
  // Fabric Manager partitions (FabricManagerPartitioning, fabric_partitions.h);
  // null: the gate is off or the node has no fabric that needs them.
  std::shared_ptr<FabricPartitions> fabric;
};

// What the plug-ins are built with; all of it outlives them.
struct FeatureContext {
  const config::FeatureGates& gates;
  const devices::NodeInventory& inventory;
  devices::GpuControl& control;
  const GpuFeatureOptions& options;
  // /dev/iommu exists.
  bool iommufd_enabled = false;
};

// Every plug-in, in the order a claim's steps run them (Undo in reverse):
// the fabric first (its partition is active before the devices change, and
// deactivated after they are back), the device types (a MIG device exists
// before it is shared), the sharing strategies, then consumable shares.
// `types`, when not empty, replaces the registered device types (tests).
FeatureList RegisteredFeatures(const FeatureContext& context, std::vector<std::unique_ptr<GpuDeviceType>> types = {});

// The inventory the plug-ins serve: with passthrough, the GPUs NVML cannot
// see because they are on vfio-pci are added.
devices::NodeInventory InventoryForFeatures(devices::NodeInventory inventory, const config::FeatureGates& gates,
                                            const GpuFeatureOptions& options);

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

// The device types the gates switch on and the config kinds that apply to
// them.
config::DriverConfigRules GpuConfigRules(const config::FeatureGates& gates);

// The plug-ins' parts of the Go driver's checkpoint, in the order their
// configState members are marshalled.
const CheckpointPieces& BuiltinCheckpointPieces();

// The plug-ins' factories, each in its plug-in's own file.
std::unique_ptr<ClaimFeature> NewTimeSlicingFeature(const FeatureContext& context,
                                                    DeviceSharedWithOthers shared_with_others);
std::unique_ptr<ClaimFeature> NewMpsFeature(const MpsRuntime& runtime, devices::GpuControl& control,
                                            const devices::NodeInventory& inventory, bool dynamic_mig);
std::unique_ptr<ClaimFeature> NewDynamicMigFeature(devices::GpuControl* control,
                                                   const devices::NodeInventory* inventory);
// Off (`enabled` false), it only binds back what a record names.
std::unique_ptr<ClaimFeature> NewPassthroughFeature(const FeatureContext& context, bool enabled);
devices::NodeInventory WithGpusOnVfio(devices::NodeInventory inventory, const config::FeatureGates& gates,
                                      devices::PciDriverControl* pci);
std::unique_ptr<ClaimFeature> NewConsumableSharesFeature(const ConsumableShares& shares);
CheckpointPiece MpsCheckpointPiece();
CheckpointPiece MigCheckpointPiece();
CheckpointPiece ConsumableSharesCheckpointPiece();
std::unique_ptr<ClaimFeature> NewFabricFeature(std::shared_ptr<FabricPartitions> fabric,
                                               DeviceSharedWithOthers shared_with_others);

}  // namespace nvdra::gpu
