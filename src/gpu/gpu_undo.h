// The GPU kind's undo record: which devices the claim's containers get,
// which GPUs had their time-slice changed (Unprepare resets those) and which
// MPS control daemons the claim runs (Unprepare deletes and cleans them up). Written
// with PrepareStarted, completed with PrepareCompleted, and read by Prepare,
// by the spec rebuild of a repeated Prepare and by Unprepare alike.
//
// On disk: {"version": 1, "devices": ["gpu-0", ...],
//           "timeSlicing": [{"device": "gpu-0", "uuid": "GPU-...", "interval": 2}],
//           "mps": [{"id": "<claim uid>-1a2b3", "namespace": "nvidia-dra-driver",
//                    "deployment": "mps-control-daemon-<id>", "root": "<plugin dir>/mps/<id>",
//                    "uuids": ["GPU-..."], "exclusiveProcess": ["GPU-..."],
//                    "activeThreadPercentage": 50, "pinnedLimits": {"GPU-...": "10240M"},
//                    "multiUser": false}],
//           "mig": [{"device": "gpu-0-mig-1g10gb-19-0", "parentUUID": "GPU-...", "parentMinor": 0,
//                    "profile": "1g.10gb", "giProfileId": 19, "ciProfileId": 0, "placementStart": 0,
//                    "placementSize": 1, "enabledMigMode": false,
//                    "giId": 1, "ciId": 0, "uuid": "MIG-..."}]}
//           "vfio": [{"device": "gpu-vfio-0", "pciBusID": "0000:3b:00.0", "iommuGroup": 40,
//                     "preferIommuFD": false, "enableAPIDevice": false}],
//           "fabricPartition": {"id": 3, "gpuModuleIDs": [1, 2]}}
// A dynamic MIG item is written at Plan, before its MIG device exists (no
// giId, ciId, uuid yet): Unprepare finds the device by its placement.
#pragma once

#include <map>
#include <optional>
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

// One MPS control daemon, recorded at Plan, before its directories, its shm
// mount, the compute mode or its Deployment exist, so that Unprepare after a
// crash at any step finds everything it may have to remove.
struct MpsDaemonUndo {
  std::string id;          // "<claim uid>-<first 5 hex of sha256 of the UUIDs>"
  std::string ns;          // the Deployment's namespace
  std::string deployment;  // "mps-control-daemon-<id>"
  std::string root;        // <plugin dir>/mps/<id>, holding shm/, pipe/, log/
  std::vector<std::string> uuids;             // the daemon's devices, sorted (CUDA_VISIBLE_DEVICES)
  std::vector<std::string> exclusive_process;  // full GPUs set to EXCLUSIVE_PROCESS
  std::optional<int64_t> active_thread_percentage;
  std::map<std::string, std::string> pinned_limits;  // UUID -> "<n>M"
  bool multi_user = false;
  nlohmann::json unknown = nlohmann::json::object();
  friend bool operator==(const MpsDaemonUndo&, const MpsDaemonUndo&) = default;
};

// One MIG device dynamic MIG creates for the claim.
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

// One GPU passed through (PassthroughSupport): recorded at Plan, before the
// unbind from nvidia, so that Unprepare (or the start-time sweep) binds it
// back from the record alone. The IOMMU settings are the claim's
// VfioDeviceConfig, which its container edits follow.
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

// The Fabric Manager partition the claim's GPUs form
// (FabricManagerPartitioning): recorded at Plan, before Prepare activates
// it, so that Unprepare and the start-time sweep deactivate it from the
// record alone.
struct FabricPartitionUndo {
  int id = 0;
  std::vector<int> module_ids;  // the claim's GPUs, as the claim listed them
  nlohmann::json unknown = nlohmann::json::object();
  friend bool operator==(const FabricPartitionUndo&, const FabricPartitionUndo&) = default;
};

struct GpuUndo {
  int64_t version = kGpuUndoVersion;
  // Sorted, unique. Empty in a record imported from the Go driver's
  // checkpoint: the ledger's prepared devices say it then.
  std::vector<std::string> devices;
  std::vector<TimeSliceUndo> time_slicing;
  std::vector<MpsDaemonUndo> mps;
  std::vector<MigDeviceUndo> mig;
  std::vector<VfioUndo> vfio;
  std::optional<FabricPartitionUndo> fabric_partition;
  // timeSlicing, mps, mig and vfio items this version cannot read (kept verbatim,
  // skipped by Unprepare with a warning) and unknown top-level fields (a
  // fabricPartition this version cannot read among them).
  std::vector<nlohmann::json> unreadable_time_slicing;
  std::vector<nlohmann::json> unreadable_mps;
  std::vector<nlohmann::json> unreadable_mig;
  std::vector<nlohmann::json> unreadable_vfio;
  nlohmann::json unknown = nlohmann::json::object();
  friend bool operator==(const GpuUndo&, const GpuUndo&) = default;
};

nlohmann::json EncodeGpuUndo(const GpuUndo& undo);
// Null (no record) decodes as an empty record; a record of the wrong shape
// (not an object, a field of the wrong type) is InvalidArgument.
Result<GpuUndo> DecodeGpuUndo(const nlohmann::json& j);

}  // namespace nvdra::gpu
