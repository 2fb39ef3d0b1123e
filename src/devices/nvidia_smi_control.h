// GpuControl through nvidia-smi from the driver root, as upstream does:
// time slicing is "nvidia-smi -i <uuid> -c DEFAULT" followed by
// "nvidia-smi compute-policy -i <uuid> --set-timeslice <n>". The command
// runner is injectable so tests see the exact command lines.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "devices/gpu_control.h"

namespace nvdra::devices {

// Runs argv[0] with argv and extra environment entries ("K=V"); returns an
// error with the command's output when it fails.
using CommandRunner =
    std::function<Status(const std::vector<std::string>& argv, const std::vector<std::string>& env)>;

// fork/exec and wait, capturing combined output for error messages.
Status RunCommand(const std::vector<std::string>& argv, const std::vector<std::string>& env);

class NvidiaSmiControl final : public GpuControl {
 public:
  // `nvidia_smi`: the binary; `nvml_library`: prepended to LD_PRELOAD so the
  // binary uses the same NVML as we do.
  NvidiaSmiControl(std::string nvidia_smi, std::string nvml_library, CommandRunner runner = RunCommand);
  Status SetTimeSlice(const std::string& gpu_uuid, int interval) override;
  Status SetComputeMode(const std::string& gpu_uuid, const std::string& mode) override;

 private:
  Status Run(const std::vector<std::string>& args);
  std::string nvidia_smi_;
  std::string nvml_library_;
  CommandRunner runner_;
};

}  // namespace nvdra::devices
