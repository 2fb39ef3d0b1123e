#include "devices/fabric_manager.h"

#include <algorithm>
#include <set>

#include "util/file_util.h"

namespace nvdra::devices {

std::vector<int> FabricPartition::ModuleIds() const {
  std::vector<int> out;
  for (const auto& g : gpus) out.push_back(g.module_id);
  return out;
}

Status ValidateFabricPartitions(const std::vector<FabricPartition>& partitions) {
  std::set<int> ids;
  for (const auto& p : partitions) {
    if (!ids.insert(p.id).second) {
      return FailedPrecondition("fabricmanager: FM returned duplicate partitionId " + std::to_string(p.id));
    }
    if (p.gpus.empty()) return FailedPrecondition("fabricmanager: partition " + std::to_string(p.id) + " has no GPUs");
    std::set<int> seen;
    for (const auto& g : p.gpus) {
      if (!seen.insert(g.module_id).second) {
        return FailedPrecondition("fabricmanager: partition " + std::to_string(p.id) + " references gpuModuleID " +
                                  std::to_string(g.module_id) + " twice");
      }
    }
  }
  return Status::Ok();
}

Result<std::map<int, std::map<int, int>>> PartitionsBySizeByModuleId(const std::vector<FabricPartition>& partitions) {
  std::map<int, std::map<int, int>> out;
  for (const auto& p : partitions) {
    const int size = static_cast<int>(p.gpus.size());
    for (const auto& g : p.gpus) {
      auto [it, fresh] = out[g.module_id].emplace(size, p.id);
      if (!fresh) {
        return FailedPrecondition("fabricmanager: gpuModuleID " + std::to_string(g.module_id) +
                                  " appears in two partitions of size " + std::to_string(size) + " (" +
                                  std::to_string(it->second) + " and " + std::to_string(p.id) + ")");
      }
    }
  }
  return out;
}

const FabricPartition* FindPartitionByModuleIds(const std::vector<FabricPartition>& partitions,
                                                const std::vector<int>& module_ids) {
  if (module_ids.empty()) return nullptr;
  const std::set<int> want(module_ids.begin(), module_ids.end());
  for (const auto& p : partitions) {
    const auto ids = p.ModuleIds();
    if (std::set<int>(ids.begin(), ids.end()) == want && ids.size() == want.size()) return &p;
  }
  return nullptr;
}

Result<bool> HasFabricManagerFabric(const std::string& proc_root, const std::string& sysfs_root) {
  const std::string nvswitch = JoinPath(proc_root, "driver/nvidia-nvswitch/devices");
  if (PathExists(nvswitch)) {
    auto entries = ListDirectory(nvswitch);
    if (!entries.ok()) return entries.status().Wrap("read " + nvswitch);
    if (!entries->empty()) return true;
  }
  const std::string ib = JoinPath(sysfs_root, "class/infiniband");
  if (!PathExists(ib)) return false;
  auto names = ListDirectory(ib);
  if (!names.ok()) return names.status().Wrap("read " + ib);
  for (const auto& n : *names) {
    const std::string vpd = JoinPath(JoinPath(ib, n), "device/vpd");
    if (!PathExists(vpd)) continue;
    auto data = ReadFileToString(vpd);
    if (!data.ok()) return data.status().Wrap("read " + vpd);
    if (data->find("SW_MNG") != std::string::npos) return true;
  }
  return false;
}

}  // namespace nvdra::devices
