// NVIDIA Fabric Manager as the GPU plugin sees it (the
// FabricManagerPartitioning gate): the fabric partitions Fabric Manager
// offers on an NVSwitch (or NVLink5 switch) node, each a set of GPUs named
// by their module id, and their activation. Two backends: libnvfm loaded
// with dlopen (devices/nvml/nvfm_fabric_manager.h) and the mock's, whose
// partitions come from the mock profile (devices/mock/mock_fabric_manager.h).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "util/status.h"

namespace nvdra::devices {

// One GPU of a partition, as Fabric Manager reports it.
struct FabricPartitionGpu {
  int module_id = 0;  // the GPU's physical id, NVML's module id
  std::string uuid;
  std::string pci_bus_id;
  friend bool operator==(const FabricPartitionGpu&, const FabricPartitionGpu&) = default;
};

struct FabricPartition {
  int id = 0;
  bool active = false;
  std::vector<FabricPartitionGpu> gpus;
  // The module ids of its GPUs, in Fabric Manager's order.
  std::vector<int> ModuleIds() const;
  friend bool operator==(const FabricPartition&, const FabricPartition&) = default;
};

class FabricManager {
 public:
  virtual ~FabricManager() = default;
  // Every partition Fabric Manager supports on this node, with its GPUs and
  // whether it is active now.
  virtual Result<std::vector<FabricPartition>> Partitions() = 0;
  // Programs the NVSwitch fabric for the partition / releases it. Not
  // idempotent in Fabric Manager itself: callers ask Partitions() first.
  virtual Status Activate(int partition_id) = 0;
  virtual Status Deactivate(int partition_id) = 0;
};

// Upstream's checks of the partition list Fabric Manager reports: unique
// ids, no empty partition, no GPU twice in one partition.
Status ValidateFabricPartitions(const std::vector<FabricPartition>& partitions);

// Per module id, the partition of each size holding that GPU (size ->
// partition id): what the `partitionN` attributes publish. A GPU in two
// partitions of one size is an error, as upstream.
Result<std::map<int, std::map<int, int>>> PartitionsBySizeByModuleId(const std::vector<FabricPartition>& partitions);

// The partition whose GPU set equals `module_ids` (as a set), or nullptr.
const FabricPartition* FindPartitionByModuleIds(const std::vector<FabricPartition>& partitions,
                                                const std::vector<int>& module_ids);

// Whether the node has a fabric that needs Fabric Manager, as upstream (and
// the driver container) decide: NVSwitch devices under
// <proc_root>/driver/nvidia-nvswitch/devices, or an InfiniBand device whose
// VPD (<sysfs_root>/class/infiniband/*/device/vpd) carries "SW_MNG" (an
// NVLink5 switch-managed fabric).
Result<bool> HasFabricManagerFabric(const std::string& proc_root, const std::string& sysfs_root);

}  // namespace nvdra::devices
