// GpuControl through nvidia-smi from the driver root, as upstream does:
// time slicing is "nvidia-smi -i <uuid> -c DEFAULT" followed by
// "nvidia-smi compute-policy -i <uuid> --set-timeslice <n>". The command
// runner is injectable so tests see the exact command lines.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "devices/gpu_control.h"

namespace nvdra::devices {

// Runs argv[0] with argv and extra environment entries ("K=V"); returns an
// error with the command's output when it fails.
using CommandRunner = std::function<Status(const std::vector<std::string>& argv, const std::vector<std::string>& env)>;

// How long an external command may run before it is killed: nvidia-smi can
// hang on a GPU that stopped answering, and a Prepare or Unprepare waiting on
// it must not hang with it.
inline constexpr std::chrono::milliseconds kDefaultCommandTimeout{30'000};

// fork/exec and wait, capturing combined output for error messages. The
// command runs in its own process group; when it outlives `timeout` the whole
// group is killed and the result is DeadlineExceeded.
Status RunCommandWithin(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                        std::chrono::milliseconds timeout);
// The same with kDefaultCommandTimeout.
Status RunCommand(const std::vector<std::string>& argv, const std::vector<std::string>& env);
// The same, returning what the command printed (stdout and stderr, the
// first 64 KiB) when it exits 0.
Result<std::string> RunCommandOutput(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                     std::chrono::milliseconds timeout);

class NvidiaSmiControl final : public GpuControl {
 public:
  // `nvidia_smi`: the binary; `nvml_library`: prepended to LD_PRELOAD so the
  // binary uses the same NVML as we do.
  NvidiaSmiControl(std::string nvidia_smi, std::string nvml_library, CommandRunner runner = RunCommand);
  Status SetTimeSlice(const std::string& gpu_uuid, int interval) override;
  Status SetComputeMode(const std::string& gpu_uuid, const std::string& mode) override;
  // "nvidia-smi -i <uuid> -pm 0|1": nvidia-smi asks nvidia-persistenced
  // where it runs, else NVML.
  Status SetPersistenceMode(const std::string& gpu_uuid, bool enabled) override;

 private:
  Status Run(const std::vector<std::string>& args);
  std::string nvidia_smi_;
  std::string nvml_library_;
  CommandRunner runner_;
};

}  // namespace nvdra::devices
