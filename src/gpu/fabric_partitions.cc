#include "gpu/fabric_partitions.h"

#include <set>

#include "util/failpoint.h"
#include "util/log.h"

namespace nvdra::gpu {

namespace {

// "[1 2 3]", as Go prints a []int in upstream's messages.
std::string GoList(const std::vector<int>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? " " : "") + std::to_string(ids[i]);
  return out + "]";
}

}  // namespace

void PutModuleIdAttribute(const devices::GpuInfo& gpu, model::PublishedDevice& d) {
  if (gpu.module_id && *gpu.module_id != 0) d.attributes["gpuModuleID"] = static_cast<int64_t>(*gpu.module_id);
}

FabricPartitions::FabricPartitions(std::unique_ptr<devices::FabricManager> fm,
                                   std::vector<devices::FabricPartition> partitions,
                                   std::map<int, std::map<int, int>> by_size)
    : fm_(std::move(fm)), partitions_(std::move(partitions)), by_size_(std::move(by_size)) {}

Result<std::unique_ptr<FabricPartitions>> FabricPartitions::Open(std::unique_ptr<devices::FabricManager> fm) {
  if (fm == nullptr) return Internal("fabricmanager: nil FM client");
  auto partitions = fm->Partitions();
  if (!partitions.ok()) return partitions.status().Wrap("fabricmanager: fmGetSupportedFabricPartitions");
  NVDRA_RETURN_IF_ERROR(devices::ValidateFabricPartitions(*partitions));
  NVDRA_ASSIGN_OR_RETURN(auto by_size, devices::PartitionsBySizeByModuleId(*partitions));
  NVDRA_INFO("Fabric Manager offers {} partitions; FM partition attributes enabled", partitions->size());
  return std::unique_ptr<FabricPartitions>(new FabricPartitions(std::move(fm), std::move(partitions).value(),
                                                                std::move(by_size)));
}

void FabricPartitions::PutAttributes(const devices::GpuInfo& gpu, model::PublishedDevice& d) const {
  PutModuleIdAttribute(gpu, d);
  if (!gpu.module_id) return;
  auto it = by_size_.find(*gpu.module_id);
  if (it == by_size_.end()) return;
  for (const auto& [size, id] : it->second) d.attributes["partition" + std::to_string(size)] = static_cast<int64_t>(id);
}

Result<FabricPartitionUndo> FabricPartitions::Match(const std::vector<const devices::GpuInfo*>& gpus) const {
  FabricPartitionUndo out;
  for (const devices::GpuInfo* g : gpus) {
    if (g->module_id.value_or(0) == 0) {
      return FailedPrecondition("fabric manager: no gpuModuleID for GPU at PCI \"" + g->pci_bus_id +
                                "\"; refusing partition activation");
    }
    out.module_ids.push_back(*g->module_id);
  }
  const devices::FabricPartition* p = devices::FindPartitionByModuleIds(partitions_, out.module_ids);
  if (p == nullptr) {
    return FailedPrecondition("fabric manager: GPU module set " + GoList(out.module_ids) +
                              " does not match any FM partition; refusing partition activation");
  }
  out.id = p->id;
  return out;
}

Result<bool> FabricPartitions::IsActive(int id) {
  auto partitions = fm_->Partitions();
  if (!partitions.ok()) {
    return partitions.status().Wrap("fabricmanager: resolving partition " + std::to_string(id) +
                                    " activation state: fabricmanager: fmGetSupportedFabricPartitions");
  }
  for (const auto& p : *partitions) {
    if (p.id == id) return p.active;
  }
  return false;
}

Status FabricPartitions::Activate(const std::string& claim_uid, const FabricPartitionUndo& partition) {
  const std::string what = "activating fabric partition " + std::to_string(partition.id);
  MutexLock lock(mu_);
  auto active = IsActive(partition.id);
  if (!active.ok()) return active.status().Wrap(what);
  if (*active) {
    NVDRA_VLOG(4, "claim {}: Fabric Manager partition {} already active; skipping activation", claim_uid, partition.id);
    return Status::Ok();
  }
  NVDRA_INFO("Fabric Manager: activating partition {} for {}-GPU claim {}", partition.id, partition.module_ids.size(),
             claim_uid);
  NVDRA_RETURN_IF_ERROR(fm_->Activate(partition.id)
                            .Wrap("fabricmanager: fmActivateFabricPartition(" + std::to_string(partition.id) + ")")
                            .Wrap(what));
  return NVDRA_FAILPOINT("fabric-partition-after-activate");
}

Status FabricPartitions::Deactivate(const std::string& claim_uid, const FabricPartitionUndo& partition) {
  const std::string what = "deactivating fabric partition " + std::to_string(partition.id);
  MutexLock lock(mu_);
  auto active = IsActive(partition.id);
  if (!active.ok()) return active.status().Wrap(what);
  if (!*active) {
    NVDRA_VLOG(4, "claim {}: Fabric Manager partition {} already inactive; skipping deactivation", claim_uid,
               partition.id);
    return Status::Ok();
  }
  NVDRA_INFO("Fabric Manager: deactivating partition {} for {}-GPU claim {}", partition.id, partition.module_ids.size(),
             claim_uid);
  return fm_->Deactivate(partition.id)
      .Wrap("fabricmanager: fmDeactivateFabricPartition(" + std::to_string(partition.id) + ")")
      .Wrap(what);
}

Result<int> FabricPartitions::SweepOrphans(const std::function<Result<Owners>()>& owners) {
  MutexLock lock(mu_);
  auto partitions = fm_->Partitions();
  if (!partitions.ok()) return partitions.status().Wrap("fabricmanager: fmGetSupportedFabricPartitions");
  std::vector<int> active;
  for (const auto& p : *partitions) {
    if (p.active) active.push_back(p.id);
  }
  if (active.empty()) return 0;
  // Read after the listing, under the lock: a claim recorded later has not
  // activated anything yet.
  NVDRA_ASSIGN_OR_RETURN(Owners owned, owners());
  if (owned.unknown) {
    NVDRA_VLOG(4, "Fabric Manager partition sweep skipped: a claim imported from the Go driver's checkpoint may "
                  "hold an active partition");
    return 0;
  }
  int n = 0;
  for (int id : active) {
    if (owned.ids.count(id) != 0) continue;
    NVDRA_RETURN_IF_ERROR(fm_->Deactivate(id).Wrap("deactivating fabric partition " + std::to_string(id) +
                                                   " that no claim owns"));
    NVDRA_WARN("Fabric Manager partition {} was left active by no prepared claim; deactivated", id);
    ++n;
  }
  return n;
}

}  // namespace nvdra::gpu
