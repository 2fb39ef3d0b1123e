#include "devices/mock/mock_fabric_manager.h"

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "util/file_util.h"

namespace nvdra::devices {

MockFabricManager::MockFabricManager(std::vector<FabricPartition> partitions, std::string mock_root)
    : partitions_(std::move(partitions)), root_(std::move(mock_root)) {}

std::string MockFabricManager::state_path() const { return JoinPath(root_, "state/fabric-manager.json"); }
std::string MockFabricManager::log_path() const { return JoinPath(root_, "state/fabric-manager.log"); }
std::string MockFabricManager::failures_path() const { return JoinPath(root_, "fabric-manager-failures"); }

const FabricPartition* MockFabricManager::Find(int partition_id) const {
  for (const auto& p : partitions_) {
    if (p.id == partition_id) return &p;
  }
  return nullptr;
}

Result<std::set<int>> MockFabricManager::ReadActive() const {
  if (!PathExists(state_path())) return std::set<int>();
  NVDRA_ASSIGN_OR_RETURN(std::string text, ReadFileToString(state_path()));
  try {
    auto j = nlohmann::json::parse(text);
    return j.at("active").get<std::set<int>>();
  } catch (const nlohmann::json::exception& e) {
    return DataLoss("mock Fabric Manager state " + state_path() + " is damaged: " + e.what());
  }
}

Status MockFabricManager::WriteActive(const std::set<int>& active, const std::string& logged) const {
  NVDRA_RETURN_IF_ERROR(MakeDirectories(JoinPath(root_, "state")));
  NVDRA_RETURN_IF_ERROR(WriteFileAtomically(state_path(), nlohmann::json{{"active", active}}.dump() + "\n"));
  int fd = ::open(log_path().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Internal("open " + log_path() + ": " + ErrnoText(errno));
  const std::string line = logged + "\n";
  const bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  return ok ? Status::Ok() : Internal("write " + log_path());
}

Status MockFabricManager::InjectedFailure(const std::string& call, int partition_id) const {
  if (!PathExists(failures_path())) return Status::Ok();
  auto text = ReadFileToString(failures_path());
  if (!text.ok()) return Status::Ok();
  std::istringstream lines(*text);
  for (std::string verb, what; lines >> verb >> what;) {
    if (verb == call && (what == "*" || what == std::to_string(partition_id))) {
      return Internal("fm" + std::string(call == "activate" ? "Activate" : "Deactivate") +
                      "FabricPartition: GENERIC_ERROR (injected by " + failures_path() + ")");
    }
  }
  return Status::Ok();
}

Result<std::vector<FabricPartition>> MockFabricManager::Partitions() {
  NVDRA_ASSIGN_OR_RETURN(std::set<int> active, ReadActive());
  std::vector<FabricPartition> out = partitions_;
  for (auto& p : out) p.active = active.count(p.id) != 0;
  return out;
}

Status MockFabricManager::Activate(int partition_id) {
  NVDRA_RETURN_IF_ERROR(InjectedFailure("activate", partition_id));
  const FabricPartition* p = Find(partition_id);
  if (p == nullptr) return InvalidArgument("fmActivateFabricPartition: PARTITION_ID_NOT_IN_USE");
  NVDRA_ASSIGN_OR_RETURN(std::set<int> active, ReadActive());
  if (active.count(partition_id) != 0) return FailedPrecondition("fmActivateFabricPartition: PARTITION_EXISTS");
  for (int other : active) {
    const FabricPartition* o = Find(other);
    if (o == nullptr) continue;
    for (const auto& g : p->gpus) {
      for (const auto& h : o->gpus) {
        if (g.module_id == h.module_id) {
          return FailedPrecondition("fmActivateFabricPartition: RESOURCE_USED_IN_ANOTHER_PARTITION");
        }
      }
    }
  }
  active.insert(partition_id);
  return WriteActive(active, "activate " + std::to_string(partition_id));
}

Status MockFabricManager::Deactivate(int partition_id) {
  NVDRA_RETURN_IF_ERROR(InjectedFailure("deactivate", partition_id));
  if (Find(partition_id) == nullptr) return InvalidArgument("fmDeactivateFabricPartition: PARTITION_ID_NOT_IN_USE");
  NVDRA_ASSIGN_OR_RETURN(std::set<int> active, ReadActive());
  if (active.erase(partition_id) == 0) return FailedPrecondition("fmDeactivateFabricPartition: RESOURCE_NOT_IN_USE");
  return WriteActive(active, "deactivate " + std::to_string(partition_id));
}

}  // namespace nvdra::devices
