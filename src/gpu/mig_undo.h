// The dynamic MIG plug-in's piece of the GPU undo record (gpu_undo.h), under
// "mig": the MIG devices it creates for the claim. An item is written at
// Plan, before its MIG device exists (no giId, ciId, uuid yet): Unprepare
// finds the device by its placement.
//   [{"device": "gpu-0-mig-1g10gb-19-0", "parentUUID": "GPU-...", "parentMinor": 0,
//     "profile": "1g.10gb", "giProfileId": 19, "ciProfileId": 0, "placementStart": 0,
//     "placementSize": 1, "giId": 1, "ciId": 0, "uuid": "MIG-..."}]
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpu/gpu_undo.h"

namespace nvdra::gpu {

struct MigDeviceUndo {
  std::string device;  // the published name
  std::string parent_uuid;
  int parent_minor = 0;
  std::string profile;
  int gi_profile_id = 0;
  int ci_profile_id = 0;
  int placement_start = 0;
  int placement_size = 0;
  // Set once it exists.
  std::optional<int> gi_id, ci_id;
  std::string uuid;
  nlohmann::json unknown = nlohmann::json::object();
  friend bool operator==(const MigDeviceUndo&, const MigDeviceUndo&) = default;
};

struct MigUndo final : UndoPieceOf<MigUndo> {
  static constexpr std::string_view kKey = "mig";
  std::vector<MigDeviceUndo> devices;
  // Items this version cannot read, verbatim (skipped by Unprepare with a warning).
  std::vector<nlohmann::json> unreadable;

  bool Empty() const override { return devices.empty() && unreadable.empty(); }
  nlohmann::json Encode() const override;
  friend bool operator==(const MigUndo&, const MigUndo&) = default;
};

// A list; another shape is a newer version's piece, kept verbatim.
UndoPieceCodec MigUndoCodec();

}  // namespace nvdra::gpu
