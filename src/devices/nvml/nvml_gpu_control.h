// GpuControl on real hardware: time slicing and compute mode through
// nvidia-smi (as upstream), dynamic MIG through NVML as upstream's
// createMigDevice and deleteMigDevice do it: MIG mode with
// nvmlDeviceSetMigMode, the GPU instance created at its placement with
// nvmlDeviceCreateGpuInstanceWithPlacement, the compute instance spanning it
// with nvmlGpuInstanceCreateComputeInstance, and both destroyed compute
// instance first. Every call opens its own NVML session.
#pragma once

#include <memory>
#include <optional>

#include "devices/gpu_control.h"
#include "devices/nvml/nvml_library.h"
#include "util/mutex.h"

namespace nvdra::devices {

class NvmlGpuControl final : public GpuControl {
 public:
  // `lib` outlives the control; `smi` serves time slicing and compute mode.
  NvmlGpuControl(const NvmlLibrary* lib, std::unique_ptr<GpuControl> smi);

  Status SetTimeSlice(const std::string& gpu_uuid, int interval) override;
  Status SetComputeMode(const std::string& gpu_uuid, const std::string& mode) override;

  Result<bool> MigModeEnabled(const std::string& gpu_uuid) override EXCLUDES(mu_);
  // A change NVML leaves pending (a GPU that needs a reset) is an error.
  Status SetMigMode(const std::string& gpu_uuid, bool enabled) override EXCLUDES(mu_);
  // Every GPU instance, one entry per compute instance on it; a GPU
  // instance without a compute instance (a creation cut short) is listed
  // with ci_id -1 and no UUID. Empty with MIG mode off.
  Result<std::vector<MigInstance>> ListMigInstances(const std::string& gpu_uuid) override EXCLUDES(mu_);
  // AlreadyExists when NVML has no room at the placement. A compute
  // instance that cannot be created takes its GPU instance with it.
  Result<MigInstance> CreateMigInstance(const std::string& gpu_uuid, int gi_profile_id, int ci_profile_id,
                                        int placement_start) override EXCLUDES(mu_);
  // The compute instance (none with ci_id < 0, or one already gone, as
  // upstream tolerates), then the GPU instance once no compute instance is
  // left on it. NotFound when the GPU instance does not exist (or MIG mode
  // is off).
  Status DestroyMigInstance(const std::string& gpu_uuid, int gi_id, int ci_id) override EXCLUDES(mu_);
  // Off through nvidia-smi, which goes through nvidia-persistenced where it
  // runs; on through NVML's legacy call, because nvidia-persistenced cannot
  // take back a GPU it lost to vfio-pci (upstream does the same). Nothing
  // is changed when the mode is already on.
  Status SetPersistenceMode(const std::string& gpu_uuid, bool enabled) override;

 private:
  Result<nvmlDevice_t> Handle(const std::string& uuid) const;
  Result<bool> MigOn(nvmlDevice_t dev, const std::string& uuid) const;
  Result<std::vector<nvmlComputeInstance_t>> ComputeInstances(nvmlGpuInstance_t gi) const;
  Result<std::string> MigUuid(nvmlDevice_t dev, const nvmlComputeInstanceInfo_t& ci, unsigned gi_id) const;

  const NvmlLibrary* lib_;
  std::unique_ptr<GpuControl> smi_;
  Mutex mu_;  // one MIG change at a time
};

// NVML_COMPUTE_INSTANCE_PROFILE_<n>_SLICE for a compute instance spanning
// `slices` compute slices; nullopt for a count no profile has.
std::optional<unsigned> FullSpanComputeInstanceProfile(unsigned slices);

}  // namespace nvdra::devices
