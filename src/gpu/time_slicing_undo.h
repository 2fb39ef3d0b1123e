// The time-slicing plug-in's piece of the GPU undo record (gpu_undo.h),
// under "timeSlicing": the GPUs whose time slice Prepare changed, so that
// Unprepare resets them.
//   [{"device": "gpu-0", "uuid": "GPU-...", "interval": 2}]
#pragma once

#include <string>
#include <vector>

#include "gpu/gpu_undo.h"

namespace nvdra::gpu {

struct TimeSliceUndo {
  std::string device;
  std::string uuid;
  int interval = 0;
  nlohmann::json unknown = nlohmann::json::object();  // fields of a newer version
  friend bool operator==(const TimeSliceUndo&, const TimeSliceUndo&) = default;
};

struct TimeSlicingUndo final : UndoPieceOf<TimeSlicingUndo> {
  static constexpr std::string_view kKey = "timeSlicing";
  std::vector<TimeSliceUndo> items;
  // Items this version cannot read, verbatim (skipped by Unprepare with a warning).
  std::vector<nlohmann::json> unreadable;

  bool Empty() const override { return items.empty() && unreadable.empty(); }
  nlohmann::json Encode() const override;
  friend bool operator==(const TimeSlicingUndo&, const TimeSlicingUndo&) = default;
};

// A list, or the record is malformed.
UndoPieceCodec TimeSlicingUndoCodec();

}  // namespace nvdra::gpu
