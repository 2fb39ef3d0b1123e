// The mock node's Fabric Manager: the partitions of the mock profile
// ("fabricPartitions", docs/mock-hardware.md), their activation kept in the
// mock root so that it outlives a restart (or a kill -9) of the plugin, as
// Fabric Manager's own does:
//   state/fabric-manager.json  {"active": [<partition id>, ...]}, sorted
//   state/fabric-manager.log   one line per call that changed it:
//                              "activate <id>" / "deactivate <id>"
//   fabric-manager-failures    lines "activate <id>|*" / "deactivate <id>|*":
//                              those calls fail, to inject
// Like Fabric Manager, activating an active partition, deactivating an
// inactive one, or activating one that shares a GPU with an active one,
// fails (the callers check the state first).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "devices/fabric_manager.h"

namespace nvdra::devices {

class MockFabricManager final : public FabricManager {
 public:
  MockFabricManager(std::vector<FabricPartition> partitions, std::string mock_root);

  Result<std::vector<FabricPartition>> Partitions() override;
  Status Activate(int partition_id) override;
  Status Deactivate(int partition_id) override;

  std::string state_path() const;
  std::string log_path() const;
  std::string failures_path() const;

 private:
  Result<std::set<int>> ReadActive() const;
  Status WriteActive(const std::set<int>& active, const std::string& logged) const;
  Status InjectedFailure(const std::string& call, int partition_id) const;
  const FabricPartition* Find(int partition_id) const;
  const std::vector<FabricPartition> partitions_;
  const std::string root_;
};

}  // namespace nvdra::devices
