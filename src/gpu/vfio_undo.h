// The passthrough plug-in's piece of the GPU undo record (gpu_undo.h), under
// "vfio": each GPU passed through (PassthroughSupport), recorded at Plan,
// before the unbind from nvidia, so that Unprepare (or the start-time sweep)
// binds it back from the record alone. The IOMMU settings are the claim's
// VfioDeviceConfig, which its container edits follow.
//   [{"device": "gpu-vfio-0", "pciBusID": "0000:3b:00.0", "iommuGroup": 40,
//     "preferIommuFD": false, "enableAPIDevice": false}]
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpu/gpu_undo.h"

namespace nvdra::gpu {

struct VfioUndo {
  std::string device;      // "gpu-vfio-<index>"
  std::string pci_bus_id;  // "0000:3b:00.0"
  std::optional<int> iommu_group;
  bool prefer_iommufd = false;
  bool enable_api_device = false;
  // The GPU as NVML knew it before the unbind: its UUID (for persistence
  // mode) and minor (its /dev/nvidia<minor>); empty and nullopt for a GPU
  // that was on vfio-pci already.
  std::string gpu_uuid;
  std::optional<int> gpu_minor;
  // nvidia-persistenced ran when the claim was planned: persistence mode is
  // turned off before the unbind and back on after the GPU is on nvidia.
  bool restore_persistence = false;
  nlohmann::json unknown = nlohmann::json::object();
  friend bool operator==(const VfioUndo&, const VfioUndo&) = default;
};

struct PassthroughUndo final : UndoPieceOf<PassthroughUndo> {
  static constexpr std::string_view kKey = "vfio";
  std::vector<VfioUndo> gpus;
  // Items this version cannot read, verbatim (skipped by Unprepare with a warning).
  std::vector<nlohmann::json> unreadable;

  bool Empty() const override { return gpus.empty() && unreadable.empty(); }
  nlohmann::json Encode() const override;
  friend bool operator==(const PassthroughUndo&, const PassthroughUndo&) = default;
};

// A list; another shape is a newer version's piece, kept verbatim.
UndoPieceCodec VfioUndoCodec();

}  // namespace nvdra::gpu
