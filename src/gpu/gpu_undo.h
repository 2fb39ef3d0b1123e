// The GPU kind's undo record: which devices the claim's containers get and
// which GPUs had their time-slice changed (Unprepare resets those). Written
// with PrepareStarted, completed with PrepareCompleted, and read by Prepare,
// by the spec rebuild of a repeated Prepare and by Unprepare alike.
//
// On disk: {"version": 1, "devices": ["gpu-0", ...],
//           "timeSlicing": [{"device": "gpu-0", "uuid": "GPU-...", "interval": 2}]}
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace nvdra::gpu {

inline constexpr int kGpuUndoVersion = 1;

struct TimeSliceUndo {
  std::string device;
  std::string uuid;
  int interval = 0;
  nlohmann::json unknown = nlohmann::json::object();  // fields of a newer version
  friend bool operator==(const TimeSliceUndo&, const TimeSliceUndo&) = default;
};

struct GpuUndo {
  int64_t version = kGpuUndoVersion;
  // Sorted, unique. Empty in a record imported from the Go driver's
  // checkpoint: the ledger's prepared devices say it then.
  std::vector<std::string> devices;
  std::vector<TimeSliceUndo> time_slicing;
  // timeSlicing items this version cannot read (kept verbatim, skipped by
  // Unprepare with a warning) and unknown top-level fields.
  std::vector<nlohmann::json> unreadable_time_slicing;
  nlohmann::json unknown = nlohmann::json::object();
  friend bool operator==(const GpuUndo&, const GpuUndo&) = default;
};

nlohmann::json EncodeGpuUndo(const GpuUndo& undo);
// Null (no record) decodes as an empty record; a record of the wrong shape
// (not an object, a field of the wrong type) is InvalidArgument.
Result<GpuUndo> DecodeGpuUndo(const nlohmann::json& j);

}  // namespace nvdra::gpu
