// Changes to a GPU's sharing settings that a claim's config asks for
// (time-slice interval, compute mode). The NVML backend runs nvidia-smi from
// the driver root; the mock backend records the calls for tests.
#pragma once

#include <string>

#include "util/status.h"

namespace nvdra::devices {

class GpuControl {
 public:
  virtual ~GpuControl() = default;
  // interval: 0 Default, 1 Short, 2 Medium, 3 Long (nvidia-smi compute-policy).
  virtual Status SetTimeSlice(const std::string& gpu_uuid, int interval) = 0;
  // mode: "DEFAULT", "EXCLUSIVE_PROCESS", "PROHIBITED".
  virtual Status SetComputeMode(const std::string& gpu_uuid, const std::string& mode) = 0;
};

// Validates arguments shared by every backend.
Status ValidateTimeSlice(int interval);
Status ValidateComputeMode(const std::string& mode);

}  // namespace nvdra::devices
