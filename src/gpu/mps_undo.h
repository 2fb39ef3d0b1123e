// The MPS plug-in's piece of the GPU undo record (gpu_undo.h), under "mps":
// the claim's MPS control daemons, each recorded at Plan, before its
// directories, its shm mount, the compute mode or its Deployment exist, so
// that Unprepare after a crash at any step finds everything it may have to
// remove.
//   [{"id": "<claim uid>-1a2b3", "namespace": "nvidia-dra-driver",
//     "deployment": "mps-control-daemon-<id>", "root": "<plugin dir>/mps/<id>",
//     "uuids": ["GPU-..."], "exclusiveProcess": ["GPU-..."],
//     "activeThreadPercentage": 50, "pinnedLimits": {"GPU-...": "10240M"},
//     "multiUser": false}]
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpu/gpu_undo.h"

namespace nvdra::gpu {

struct MpsDaemonUndo {
  std::string id;                              // "<claim uid>-<first 5 hex of sha256 of the UUIDs>"
  std::string ns;                              // the Deployment's namespace
  std::string deployment;                      // "mps-control-daemon-<id>"
  std::string root;                            // <plugin dir>/mps/<id>, holding shm/, pipe/, log/
  std::vector<std::string> uuids;              // the daemon's devices, sorted (CUDA_VISIBLE_DEVICES)
  std::vector<std::string> exclusive_process;  // full GPUs set to EXCLUSIVE_PROCESS
  std::optional<int64_t> active_thread_percentage;
  std::map<std::string, std::string> pinned_limits;  // UUID -> "<n>M"
  bool multi_user = false;
  nlohmann::json unknown = nlohmann::json::object();
  friend bool operator==(const MpsDaemonUndo&, const MpsDaemonUndo&) = default;
};

struct MpsUndo final : UndoPieceOf<MpsUndo> {
  static constexpr std::string_view kKey = "mps";
  std::vector<MpsDaemonUndo> daemons;
  // Items this version cannot read, verbatim (skipped by Unprepare with a warning).
  std::vector<nlohmann::json> unreadable;

  bool Empty() const override { return daemons.empty() && unreadable.empty(); }
  nlohmann::json Encode() const override;
  friend bool operator==(const MpsUndo&, const MpsUndo&) = default;
};

// A list; another shape is a newer version's piece, kept verbatim.
UndoPieceCodec MpsUndoCodec();

}  // namespace nvdra::gpu
