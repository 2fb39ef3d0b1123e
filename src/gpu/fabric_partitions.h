// Fabric Manager partitions for the GPU kind (the FabricManagerPartitioning
// gate), as upstream: on an NVSwitch node, a claim of full GPUs or
// passthrough GPUs gets the NVLink fabric of exactly its GPUs.
//   Publish: each full and passthrough GPU carries `gpuModuleID` (NVML's
//            module id) and, per partition size N that holds it,
//            `partitionN` = that partition's id, so a claim's
//            matchAttribute on gpu.nvidia.com/partitionN picks the GPUs of
//            one partition;
//   Plan:    the partition whose GPU set equals the claim's is recorded in
//            the undo record ("fabricPartition"), before anything changes;
//            a set that matches none fails the claim (upstream's error);
//   Prepare: the partition activated, unless Fabric Manager reports it
//            active already (a retry, a restart, a claim sharing its GPUs);
//   Unprepare: deactivated, from the record alone, unless inactive.
// SweepOrphans deactivates the active partitions no undo record names (a
// claim gone while the plugin was down): nvdra takes the node's partitions
// as its own while the gate is on.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "devices/device_info.h"
#include "devices/fabric_manager.h"
#include "gpu/fabric_partition_undo.h"
#include "model/published_device.h"
#include "util/mutex.h"

namespace nvdra::gpu {

// The `gpuModuleID` attribute, where NVML gave the GPU a module id (also
// with the gate on but no Fabric Manager on the node, as upstream).
void PutModuleIdAttribute(const devices::GpuInfo& gpu, model::PublishedDevice& d);

class FabricPartitions {
 public:
  // Reads the partitions once (their members do not change while the
  // plugin runs) and checks them as upstream does.
  static Result<std::unique_ptr<FabricPartitions>> Open(std::unique_ptr<devices::FabricManager> fm);

  // gpuModuleID and the partitionN of `gpu`.
  void PutAttributes(const devices::GpuInfo& gpu, model::PublishedDevice& d) const;

  // The partition whose GPUs are exactly `gpus` (a claim's full and
  // passthrough GPUs, each once, in the claim's order). FailedPrecondition
  // in upstream's words when a GPU has no module id or no partition matches.
  Result<FabricPartitionUndo> Match(const std::vector<const devices::GpuInfo*>& gpus) const;

  // Both idempotent: they ask Fabric Manager for the partition's state first.
  Status Activate(const std::string& claim_uid, const FabricPartitionUndo& partition) EXCLUDES(mu_);
  Status Deactivate(const std::string& claim_uid, const FabricPartitionUndo& partition) EXCLUDES(mu_);

  // The partitions the ledger's records name; `unknown`: a record that may
  // hold one without naming it (a claim imported from the Go driver's
  // checkpoint, which records no partition), so nothing is orphaned.
  struct Owners {
    std::set<int> ids;
    bool unknown = false;
  };
  // Deactivates each active partition that no record of `owners()` (read
  // after Fabric Manager's list) names. Returns how many. Runs under the
  // lock Activate takes, so a claim whose record is written after the read
  // activates only after the sweep is done.
  Result<int> SweepOrphans(const std::function<Result<Owners>()>& owners) EXCLUDES(mu_);

  const std::vector<devices::FabricPartition>& partitions() const { return partitions_; }

 private:
  FabricPartitions(std::unique_ptr<devices::FabricManager> fm, std::vector<devices::FabricPartition> partitions,
                   std::map<int, std::map<int, int>> by_size);
  // Fabric Manager's word on whether `id` is active now.
  Result<bool> IsActive(int id) REQUIRES(mu_);
  Mutex mu_;  // one Fabric Manager call sequence at a time
  const std::unique_ptr<devices::FabricManager> fm_ PT_GUARDED_BY(mu_);
  const std::vector<devices::FabricPartition> partitions_;
  const std::map<int, std::map<int, int>> by_size_;  // module id -> size -> partition id
};

}  // namespace nvdra::gpu
