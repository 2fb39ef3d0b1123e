// The Fabric Manager plug-in's piece of the GPU undo record (gpu_undo.h),
// under "fabricPartition": the partition the claim's GPUs form
// (FabricManagerPartitioning), recorded at Plan, before Prepare activates
// it, so that Unprepare and the start-time sweep deactivate it from the
// record alone.
//   {"id": 3, "gpuModuleIDs": [1, 2]}
#pragma once

#include <vector>

#include "gpu/gpu_undo.h"

namespace nvdra::gpu {

struct FabricPartitionUndo {
  int id = 0;
  std::vector<int> module_ids;  // the claim's GPUs, as the claim listed them
  nlohmann::json unknown = nlohmann::json::object();
  friend bool operator==(const FabricPartitionUndo&, const FabricPartitionUndo&) = default;
};

struct FabricUndo final : UndoPieceOf<FabricUndo> {
  static constexpr std::string_view kKey = "fabricPartition";
  FabricPartitionUndo partition;

  FabricUndo() = default;
  explicit FabricUndo(FabricPartitionUndo p) : partition(std::move(p)) {}
  bool Empty() const override { return false; }
  nlohmann::json Encode() const override;
  friend bool operator==(const FabricUndo&, const FabricUndo&) = default;
};

// An object; one this version cannot read is kept verbatim.
UndoPieceCodec FabricPartitionUndoCodec();

}  // namespace nvdra::gpu
