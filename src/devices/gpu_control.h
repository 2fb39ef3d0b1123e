// Changes to a GPU that a claim asks for: its sharing settings (time-slice
// interval, compute mode; the NVML backend runs nvidia-smi from the driver
// root) and, for dynamic MIG, its MIG mode and the MIG devices (GPU and
// compute instances) on it. The mock backend records them for tests.
#pragma once

#include <string>
#include <vector>

#include "util/status.h"

namespace nvdra::devices {

// A MIG device that exists on a GPU: its GPU instance (where it sits) and
// the compute instance on it.
struct MigInstance {
  std::string parent_uuid;
  int gi_profile_id = 0;
  int ci_profile_id = 0;
  int placement_start = 0;
  int placement_size = 0;
  int gi_id = 0;
  int ci_id = 0;
  std::string uuid;  // "MIG-..."
  friend bool operator==(const MigInstance&, const MigInstance&) = default;
};

class GpuControl {
 public:
  virtual ~GpuControl() = default;
  // interval: 0 Default, 1 Short, 2 Medium, 3 Long (nvidia-smi compute-policy).
  virtual Status SetTimeSlice(const std::string& gpu_uuid, int interval) = 0;
  // mode: "DEFAULT", "EXCLUSIVE_PROCESS", "PROHIBITED".
  virtual Status SetComputeMode(const std::string& gpu_uuid, const std::string& mode) = 0;

  // Dynamic MIG. A backend without them answers Unimplemented.
  virtual Result<bool> MigModeEnabled(const std::string& gpu_uuid);
  virtual Status SetMigMode(const std::string& gpu_uuid, bool enabled);
  // The MIG devices on the GPU, by GPU instance id.
  virtual Result<std::vector<MigInstance>> ListMigInstances(const std::string& gpu_uuid);
  // Creates the GPU instance of `gi_profile_id` at `placement_start` and a
  // compute instance of `ci_profile_id` spanning it. AlreadyExists when
  // the placement (or a part of it) is taken.
  virtual Result<MigInstance> CreateMigInstance(const std::string& gpu_uuid, int gi_profile_id, int ci_profile_id,
                                                int placement_start);
  // Destroys the compute instance, then the GPU instance. NotFound when
  // the GPU instance does not exist.
  virtual Status DestroyMigInstance(const std::string& gpu_uuid, int gi_id, int ci_id);

  // Passthrough: persistence mode, turned off before a GPU leaves nvidia
  // and on again after it is back. FailedPrecondition from a backend
  // without it.
  virtual Status SetPersistenceMode(const std::string& gpu_uuid, bool enabled);
};

// Validates arguments shared by every backend.
Status ValidateTimeSlice(int interval);
Status ValidateComputeMode(const std::string& mode);

}  // namespace nvdra::devices
