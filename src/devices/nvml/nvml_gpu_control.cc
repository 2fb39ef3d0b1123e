#include "devices/nvml/nvml_gpu_control.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <vector>

namespace nvdra::devices {

std::optional<unsigned> FullSpanComputeInstanceProfile(unsigned slices) {
  switch (slices) {
    case 1: return NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE;
    case 2: return NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE;
    case 3: return NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE;
    case 4: return NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE;
    case 6: return NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE;
    case 7: return NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE;
    case 8: return NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE;
    default: return std::nullopt;
  }
}

namespace {

// Compute instance profiles NVML may answer for (newer drivers know more
// than the ones named in nvml_api.h; unknown ones answer NOT_SUPPORTED).
constexpr unsigned kComputeInstanceProfileCount = 8;

bool Skippable(nvmlReturn_t rc) { return rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_INVALID_ARGUMENT; }

}  // namespace

NvmlGpuControl::NvmlGpuControl(const NvmlLibrary* lib, std::unique_ptr<GpuControl> smi)
    : lib_(lib), smi_(std::move(smi)) {}

Status NvmlGpuControl::SetTimeSlice(const std::string& gpu_uuid, int interval) {
  return smi_->SetTimeSlice(gpu_uuid, interval);
}

Status NvmlGpuControl::SetComputeMode(const std::string& gpu_uuid, const std::string& mode) {
  return smi_->SetComputeMode(gpu_uuid, mode);
}

Result<nvmlDevice_t> NvmlGpuControl::Handle(const std::string& uuid) const {
  nvmlDevice_t dev = nullptr;
  nvmlReturn_t rc = lib_->api().DeviceGetHandleByUUID(uuid.c_str(), &dev);
  if (rc == NVML_ERROR_NOT_FOUND) return NotFound("NVML knows no GPU with UUID " + uuid);
  if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceGetHandleByUUID", rc).Wrap("GPU " + uuid);
  return dev;
}

Status NvmlGpuControl::SetPersistenceMode(const std::string& gpu_uuid, bool enabled) {
  if (!enabled) return smi_->SetPersistenceMode(gpu_uuid, false);
  const NvmlApi& a = lib_->api();
  if (a.DeviceGetPersistenceMode == nullptr || a.DeviceSetPersistenceMode == nullptr) {
    return FailedPrecondition("NVML library " + lib_->path() + " has no nvmlDeviceSetPersistenceMode");
  }
  NVDRA_ASSIGN_OR_RETURN(auto session, lib_->Open());
  NVDRA_ASSIGN_OR_RETURN(nvmlDevice_t dev, Handle(gpu_uuid));
  int mode = 0;
  nvmlReturn_t rc = a.DeviceGetPersistenceMode(dev, &mode);
  if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceGetPersistenceMode", rc).Wrap("GPU " + gpu_uuid);
  if (mode == 1) return Status::Ok();
  rc = a.DeviceSetPersistenceMode(dev, 1);
  if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceSetPersistenceMode", rc).Wrap("GPU " + gpu_uuid);
  return Status::Ok();
}

Result<bool> NvmlGpuControl::MigOn(nvmlDevice_t dev, const std::string& uuid) const {
  unsigned current = 0, pending = 0;
  nvmlReturn_t rc = lib_->api().DeviceGetMigMode(dev, &current, &pending);
  if (rc == NVML_ERROR_NOT_SUPPORTED) return false;
  if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceGetMigMode", rc).Wrap("GPU " + uuid);
  return current == NVML_DEVICE_MIG_ENABLE;
}

Result<bool> NvmlGpuControl::MigModeEnabled(const std::string& gpu_uuid) {
  MutexLock l(mu_);
  NVDRA_ASSIGN_OR_RETURN(auto session, lib_->Open());
  NVDRA_ASSIGN_OR_RETURN(nvmlDevice_t dev, Handle(gpu_uuid));
  return MigOn(dev, gpu_uuid);
}

Status NvmlGpuControl::SetMigMode(const std::string& gpu_uuid, bool enabled) {
  MutexLock l(mu_);
  NVDRA_ASSIGN_OR_RETURN(auto session, lib_->Open());
  NVDRA_ASSIGN_OR_RETURN(nvmlDevice_t dev, Handle(gpu_uuid));
  nvmlReturn_t activation = NVML_SUCCESS;
  nvmlReturn_t rc = lib_->api().DeviceSetMigMode(dev, enabled ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE,
                                                 &activation);
  if (rc != NVML_SUCCESS) {
    return lib_->Error("nvmlDeviceSetMigMode", rc)
        .Wrap("GPU " + gpu_uuid + " (activation status: " + lib_->ErrorText("activation", activation) + ")");
  }
  NVDRA_ASSIGN_OR_RETURN(bool on, MigOn(dev, gpu_uuid));
  if (on != enabled) {
    return FailedPrecondition("MIG mode of GPU " + gpu_uuid + " is still " + (on ? "enabled" : "disabled") +
                              " after nvmlDeviceSetMigMode: the change is pending (the GPU needs a reset)");
  }
  return Status::Ok();
}

Result<std::vector<nvmlComputeInstance_t>> NvmlGpuControl::ComputeInstances(nvmlGpuInstance_t gi) const {
  const NvmlApi& a = lib_->api();
  std::vector<nvmlComputeInstance_t> out;
  for (unsigned j = 0; j < kComputeInstanceProfileCount; ++j) {
    nvmlComputeInstanceProfileInfo_t info{};
    nvmlReturn_t rc = a.GpuInstanceGetComputeInstanceProfileInfo(gi, j, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
                                                                 &info);
    if (Skippable(rc)) continue;
    if (rc != NVML_SUCCESS) return lib_->Error("nvmlGpuInstanceGetComputeInstanceProfileInfo", rc);
    std::vector<nvmlComputeInstance_t> cis(std::max(1u, info.instanceCount));
    unsigned n = 0;
    rc = a.GpuInstanceGetComputeInstances(gi, info.id, cis.data(), &n);
    if (Skippable(rc)) continue;
    if (rc != NVML_SUCCESS) return lib_->Error("nvmlGpuInstanceGetComputeInstances", rc);
    out.insert(out.end(), cis.begin(), cis.begin() + std::min<size_t>(n, cis.size()));
  }
  return out;
}

Result<std::string> NvmlGpuControl::MigUuid(nvmlDevice_t dev, const nvmlComputeInstanceInfo_t& ci,
                                            unsigned gi_id) const {
  const NvmlApi& a = lib_->api();
  char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  // The compute instance's device is its MIG device's handle (upstream
  // reads the MIG UUID from it); should a driver answer the parent there,
  // the MIG device is found among the GPU's MIG devices by its ids.
  if (ci.device != nullptr && a.DeviceGetUUID(ci.device, uuid, sizeof uuid) == NVML_SUCCESS &&
      std::string_view(uuid).starts_with("MIG-")) {
    return std::string(uuid);
  }
  unsigned max = 0;
  nvmlReturn_t rc = a.DeviceGetMaxMigDeviceCount(dev, &max);
  if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceGetMaxMigDeviceCount", rc);
  for (unsigned i = 0; i < max; ++i) {
    nvmlDevice_t mig = nullptr;
    rc = a.DeviceGetMigDeviceHandleByIndex(dev, i, &mig);
    if (rc != NVML_SUCCESS) continue;
    unsigned g = 0, c = 0;
    if (a.DeviceGetGpuInstanceId(mig, &g) != NVML_SUCCESS || a.DeviceGetComputeInstanceId(mig, &c) != NVML_SUCCESS) {
      continue;
    }
    if (g != gi_id || c != ci.id) continue;
    rc = a.DeviceGetUUID(mig, uuid, sizeof uuid);
    if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceGetUUID (MIG)", rc);
    return std::string(uuid);
  }
  return NotFound("no MIG device for GPU instance " + std::to_string(gi_id) + ", compute instance " +
                  std::to_string(ci.id));
}

Result<std::vector<MigInstance>> NvmlGpuControl::ListMigInstances(const std::string& gpu_uuid) {
  MutexLock l(mu_);
  const NvmlApi& a = lib_->api();
  NVDRA_ASSIGN_OR_RETURN(auto session, lib_->Open());
  NVDRA_ASSIGN_OR_RETURN(nvmlDevice_t dev, Handle(gpu_uuid));
  NVDRA_ASSIGN_OR_RETURN(bool on, MigOn(dev, gpu_uuid));
  std::vector<MigInstance> out;
  if (!on) return out;
  for (unsigned idx = 0; idx < NVML_GPU_INSTANCE_PROFILE_COUNT; ++idx) {
    nvmlGpuInstanceProfileInfo_v2_t profile{};
    profile.version = nvmlGpuInstanceProfileInfo_v2;
    nvmlReturn_t rc = a.DeviceGetGpuInstanceProfileInfoV(dev, idx, &profile);
    if (Skippable(rc)) continue;
    if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceGetGpuInstanceProfileInfoV", rc).Wrap("GPU " + gpu_uuid);
    std::vector<nvmlGpuInstance_t> gis(std::max(1u, profile.instanceCount));
    unsigned n = 0;
    rc = a.DeviceGetGpuInstances(dev, profile.id, gis.data(), &n);
    if (Skippable(rc)) continue;
    if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceGetGpuInstances", rc).Wrap("GPU " + gpu_uuid);
    for (unsigned k = 0; k < std::min<size_t>(n, gis.size()); ++k) {
      nvmlGpuInstanceInfo_t gi{};
      rc = a.GpuInstanceGetInfo(gis[k], &gi);
      if (rc != NVML_SUCCESS) return lib_->Error("nvmlGpuInstanceGetInfo", rc).Wrap("GPU " + gpu_uuid);
      MigInstance m;
      m.parent_uuid = gpu_uuid;
      m.gi_profile_id = static_cast<int>(gi.profileId);
      m.placement_start = static_cast<int>(gi.placement.start);
      m.placement_size = static_cast<int>(gi.placement.size);
      m.gi_id = static_cast<int>(gi.id);
      NVDRA_ASSIGN_OR_RETURN(auto cis, ComputeInstances(gis[k]));
      if (cis.empty()) {
        m.ci_id = -1;
        out.push_back(m);
        continue;
      }
      for (nvmlComputeInstance_t ci : cis) {
        nvmlComputeInstanceInfo_t info{};
        rc = a.ComputeInstanceGetInfo(ci, &info);
        if (rc != NVML_SUCCESS) return lib_->Error("nvmlComputeInstanceGetInfo_v2", rc).Wrap("GPU " + gpu_uuid);
        MigInstance c = m;
        c.ci_profile_id = static_cast<int>(info.profileId);
        c.ci_id = static_cast<int>(info.id);
        NVDRA_ASSIGN_OR_RETURN(c.uuid, MigUuid(dev, info, gi.id));
        out.push_back(std::move(c));
      }
    }
  }
  return out;
}

Result<MigInstance> NvmlGpuControl::CreateMigInstance(const std::string& gpu_uuid, int gi_profile_id, int ci_profile_id,
                                                      int placement_start) {
  MutexLock l(mu_);
  const NvmlApi& a = lib_->api();
  NVDRA_ASSIGN_OR_RETURN(auto session, lib_->Open());
  NVDRA_ASSIGN_OR_RETURN(nvmlDevice_t dev, Handle(gpu_uuid));
  std::string what = "GPU instance profile " + std::to_string(gi_profile_id) + " at placement " +
                     std::to_string(placement_start) + " on GPU " + gpu_uuid;
  // The placement's size, from the profile's possible placements.
  std::optional<nvmlGpuInstancePlacement_t> placement;
  for (unsigned idx = 0; idx < NVML_GPU_INSTANCE_PROFILE_COUNT && !placement; ++idx) {
    nvmlGpuInstanceProfileInfo_v2_t profile{};
    profile.version = nvmlGpuInstanceProfileInfo_v2;
    nvmlReturn_t rc = a.DeviceGetGpuInstanceProfileInfoV(dev, idx, &profile);
    if (Skippable(rc)) continue;
    if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceGetGpuInstanceProfileInfoV", rc).Wrap(what);
    if (static_cast<int>(profile.id) != gi_profile_id) continue;
    unsigned count = 0;
    rc = a.DeviceGetGpuInstancePossiblePlacements(dev, profile.id, nullptr, &count);
    if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceGetGpuInstancePossiblePlacements_v2", rc).Wrap(what);
    std::vector<nvmlGpuInstancePlacement_t> all(count);
    rc = a.DeviceGetGpuInstancePossiblePlacements(dev, profile.id, all.data(), &count);
    if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceGetGpuInstancePossiblePlacements_v2", rc).Wrap(what);
    for (unsigned i = 0; i < std::min<size_t>(count, all.size()); ++i) {
      if (static_cast<int>(all[i].start) == placement_start) placement = all[i];
    }
    if (!placement) return InvalidArgument(what + ": NVML lists no such placement");
  }
  if (!placement) return InvalidArgument(what + ": NVML lists no such GPU instance profile");
  nvmlGpuInstance_t gi = nullptr;
  nvmlReturn_t rc = a.DeviceCreateGpuInstanceWithPlacement(dev, static_cast<unsigned>(gi_profile_id), &*placement, &gi);
  if (rc == NVML_ERROR_INSUFFICIENT_RESOURCES) {
    return AlreadyExists(what + ": the placement, or a part of it, is taken (" +
                         lib_->ErrorText("nvmlDeviceCreateGpuInstanceWithPlacement", rc) + ")");
  }
  if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceCreateGpuInstanceWithPlacement", rc).Wrap(what);
  auto undo_gi = [&](Status s) -> Status {
    nvmlReturn_t d = a.GpuInstanceDestroy(gi);
    if (d != NVML_SUCCESS)
      return s.Wrap("and destroying the GPU instance again failed: " + lib_->ErrorText("nvmlGpuInstanceDestroy", d));
    return s;
  };
  nvmlGpuInstanceInfo_t gi_info{};
  rc = a.GpuInstanceGetInfo(gi, &gi_info);
  if (rc != NVML_SUCCESS) return undo_gi(lib_->Error("nvmlGpuInstanceGetInfo", rc).Wrap(what));
  nvmlComputeInstanceProfileInfo_t ci_profile{};
  rc = a.GpuInstanceGetComputeInstanceProfileInfo(gi, static_cast<unsigned>(ci_profile_id),
                                                  NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &ci_profile);
  if (rc != NVML_SUCCESS) {
    return undo_gi(lib_->Error("nvmlGpuInstanceGetComputeInstanceProfileInfo", rc)
                       .Wrap("compute instance profile " + std::to_string(ci_profile_id) + " for " + what));
  }
  nvmlComputeInstance_t ci = nullptr;
  rc = a.GpuInstanceCreateComputeInstance(gi, ci_profile.id, &ci);
  if (rc != NVML_SUCCESS) return undo_gi(lib_->Error("nvmlGpuInstanceCreateComputeInstance", rc).Wrap(what));
  nvmlComputeInstanceInfo_t ci_info{};
  rc = a.ComputeInstanceGetInfo(ci, &ci_info);
  if (rc != NVML_SUCCESS) return lib_->Error("nvmlComputeInstanceGetInfo_v2", rc).Wrap(what);
  MigInstance m;
  m.parent_uuid = gpu_uuid;
  m.gi_profile_id = static_cast<int>(gi_info.profileId);
  m.ci_profile_id = static_cast<int>(ci_info.profileId);
  m.placement_start = static_cast<int>(gi_info.placement.start);
  m.placement_size = static_cast<int>(gi_info.placement.size);
  m.gi_id = static_cast<int>(gi_info.id);
  m.ci_id = static_cast<int>(ci_info.id);
  NVDRA_ASSIGN_OR_RETURN(m.uuid, MigUuid(dev, ci_info, gi_info.id));
  return m;
}

Status NvmlGpuControl::DestroyMigInstance(const std::string& gpu_uuid, int gi_id, int ci_id) {
  MutexLock l(mu_);
  const NvmlApi& a = lib_->api();
  NVDRA_ASSIGN_OR_RETURN(auto session, lib_->Open());
  NVDRA_ASSIGN_OR_RETURN(nvmlDevice_t dev, Handle(gpu_uuid));
  std::string what = "GPU instance " + std::to_string(gi_id) + " on GPU " + gpu_uuid;
  nvmlGpuInstance_t gi = nullptr;
  nvmlReturn_t rc = a.DeviceGetGpuInstanceById(dev, static_cast<unsigned>(gi_id), &gi);
  if (rc == NVML_ERROR_NOT_FOUND || rc == NVML_ERROR_NOT_SUPPORTED) {
    return NotFound(what + " does not exist (" + lib_->ErrorText("nvmlDeviceGetGpuInstanceById", rc) + ")");
  }
  if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceGetGpuInstanceById", rc).Wrap(what);
  if (ci_id >= 0) {
    nvmlComputeInstance_t ci = nullptr;
    rc = a.GpuInstanceGetComputeInstanceById(gi, static_cast<unsigned>(ci_id), &ci);
    if (rc == NVML_SUCCESS) {
      rc = a.ComputeInstanceDestroy(ci);
      if (rc != NVML_SUCCESS) {
        return lib_->Error("nvmlComputeInstanceDestroy", rc)
            .Wrap("compute instance " + std::to_string(ci_id) + " of " + what);
      }
    } else if (rc != NVML_ERROR_NOT_FOUND) {
      return lib_->Error("nvmlGpuInstanceGetComputeInstanceById", rc).Wrap(what);
    }
  }
  NVDRA_ASSIGN_OR_RETURN(auto left, ComputeInstances(gi));
  if (!left.empty()) return Status::Ok();  // another compute instance still uses the GPU instance
  rc = a.GpuInstanceDestroy(gi);
  if (rc != NVML_SUCCESS) return lib_->Error("nvmlGpuInstanceDestroy", rc).Wrap(what);
  return Status::Ok();
}

}  // namespace nvdra::devices
