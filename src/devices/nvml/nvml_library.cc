#include "devices/nvml/nvml_library.h"

#include <dlfcn.h>

#include <type_traits>

namespace nvdra::devices {

namespace {

// Every symbol we use, with whether it is required: `f(slot, name, required)`.
template <class F>
void ForEachSymbol(NvmlApi& a, F&& f) {
  f(a.Init, "nvmlInit_v2", true);
  f(a.Shutdown, "nvmlShutdown", true);
  f(a.ErrorString, "nvmlErrorString", true);
  f(a.SystemGetDriverVersion, "nvmlSystemGetDriverVersion", true);
  f(a.SystemGetCudaDriverVersion, "nvmlSystemGetCudaDriverVersion", true);
  f(a.DeviceGetCount, "nvmlDeviceGetCount_v2", true);
  f(a.DeviceGetHandleByIndex, "nvmlDeviceGetHandleByIndex_v2", true);
  f(a.DeviceGetMinorNumber, "nvmlDeviceGetMinorNumber", true);
  f(a.DeviceGetUUID, "nvmlDeviceGetUUID", true);
  f(a.DeviceGetName, "nvmlDeviceGetName", true);
  f(a.DeviceGetBrand, "nvmlDeviceGetBrand", true);
  f(a.DeviceGetArchitecture, "nvmlDeviceGetArchitecture", true);
  f(a.DeviceGetCudaComputeCapability, "nvmlDeviceGetCudaComputeCapability", true);
  f(a.DeviceGetPciInfo, "nvmlDeviceGetPciInfo_v3", true);
  f(a.DeviceGetMemoryInfo, "nvmlDeviceGetMemoryInfo", true);
  f(a.DeviceGetMigMode, "nvmlDeviceGetMigMode", true);
  f(a.DeviceGetMaxMigDeviceCount, "nvmlDeviceGetMaxMigDeviceCount", true);
  f(a.DeviceGetMigDeviceHandleByIndex, "nvmlDeviceGetMigDeviceHandleByIndex", true);
  f(a.DeviceGetGpuInstanceId, "nvmlDeviceGetGpuInstanceId", true);
  f(a.DeviceGetComputeInstanceId, "nvmlDeviceGetComputeInstanceId", true);
  f(a.DeviceGetGpuInstanceById, "nvmlDeviceGetGpuInstanceById", true);
  f(a.GpuInstanceGetInfo, "nvmlGpuInstanceGetInfo", true);
  f(a.GpuInstanceGetComputeInstanceById, "nvmlGpuInstanceGetComputeInstanceById", true);
  f(a.ComputeInstanceGetInfo, "nvmlComputeInstanceGetInfo_v2", true);
  f(a.DeviceGetGpuInstanceProfileInfoV, "nvmlDeviceGetGpuInstanceProfileInfoV", true);
  f(a.DeviceGetHandleByUUID, "nvmlDeviceGetHandleByUUID", true);
  f(a.DeviceSetMigMode, "nvmlDeviceSetMigMode", true);
  f(a.DeviceGetGpuInstancePossiblePlacements, "nvmlDeviceGetGpuInstancePossiblePlacements_v2", true);
  f(a.DeviceCreateGpuInstanceWithPlacement, "nvmlDeviceCreateGpuInstanceWithPlacement", true);
  f(a.DeviceGetGpuInstances, "nvmlDeviceGetGpuInstances", true);
  f(a.GpuInstanceGetComputeInstanceProfileInfo, "nvmlGpuInstanceGetComputeInstanceProfileInfo", true);
  f(a.GpuInstanceCreateComputeInstance, "nvmlGpuInstanceCreateComputeInstance", true);
  f(a.GpuInstanceGetComputeInstances, "nvmlGpuInstanceGetComputeInstances", true);
  f(a.ComputeInstanceDestroy, "nvmlComputeInstanceDestroy", true);
  f(a.GpuInstanceDestroy, "nvmlGpuInstanceDestroy", true);
  f(a.EventSetCreate, "nvmlEventSetCreate", true);
  f(a.EventSetFree, "nvmlEventSetFree", true);
  f(a.EventSetWait, "nvmlEventSetWait_v2", true);
  f(a.DeviceRegisterEvents, "nvmlDeviceRegisterEvents", true);
  f(a.DeviceGetSupportedEventTypes, "nvmlDeviceGetSupportedEventTypes", true);
  f(a.DeviceGetGpuFabricInfo, "nvmlDeviceGetGpuFabricInfo", false);
  f(a.DeviceGetAddressingMode, "nvmlDeviceGetAddressingMode", false);
  f(a.DeviceGetPersistenceMode, "nvmlDeviceGetPersistenceMode", false);
  f(a.DeviceSetPersistenceMode, "nvmlDeviceSetPersistenceMode", false);
  f(a.DeviceGetModuleId, "nvmlDeviceGetModuleId", false);
}

// What each call answers while the library is unloaded (ReleaseDriver):
// NVML's own answer before nvmlInit.
template <class R, class... A>
R NotLoaded(A...) {
  if constexpr (std::is_same_v<R, const char*>) {
    return "Uninitialized";
  } else {
    return NVML_ERROR_UNINITIALIZED;
  }
}

template <class R, class... A>
void StubOut(R (*&fn)(A...)) {
  fn = &NotLoaded<R, A...>;
}

}  // namespace

NvmlLibrary::~NvmlLibrary() {
  if (handle_ != nullptr) ::dlclose(handle_);
}

Result<std::unique_ptr<NvmlLibrary>> NvmlLibrary::Load(const std::string& path) {
  std::unique_ptr<NvmlLibrary> lib(new NvmlLibrary());
  lib->path_ = path;
  ::dlerror();
  lib->handle_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib->handle_ == nullptr) {
    const char* err = ::dlerror();
    return Unavailable("loading NVML from " + path + ": " + (err ? err : "unknown dlopen error"));
  }
  std::string missing;
  auto resolve = [&](auto& fn, const char* name, bool required) {
    void* sym = ::dlsym(lib->handle_, name);
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(sym);
    if (sym == nullptr && required) missing += (missing.empty() ? "" : ", ") + std::string(name);
  };
  ForEachSymbol(lib->api_, resolve);
  if (!missing.empty()) {
    return FailedPrecondition("NVML library " + path + " lacks required symbols: " + missing +
                              " (driver too old, or not libnvidia-ml)");
  }
  return lib;
}

void NvmlLibrary::Unload() {
  std::unique_lock lock(load_mu_);
  ForEachSymbol(api_, [](auto& fn, const char*, bool) { StubOut(fn); });
  if (handle_ != nullptr) ::dlclose(handle_);
  handle_ = nullptr;
}

Status NvmlLibrary::Reload(const std::string& path) {
  std::unique_lock lock(load_mu_);
  if (handle_ != nullptr) return Status::Ok();
  NVDRA_ASSIGN_OR_RETURN(std::unique_ptr<NvmlLibrary> fresh, Load(path));
  std::swap(handle_, fresh->handle_);
  api_ = fresh->api_;
  path_ = path;
  return Status::Ok();
}

std::string NvmlLibrary::ErrorText(const char* call, nvmlReturn_t rc) const {
  const char* text = api_.ErrorString ? api_.ErrorString(rc) : nullptr;
  return std::string(call) + ": " + (text ? text : "unknown error") + " (" + std::to_string(rc) + ")";
}

Status NvmlLibrary::Error(const char* call, nvmlReturn_t rc) const {
  std::string msg = "NVML " + ErrorText(call, rc);
  switch (rc) {
    case NVML_ERROR_UNINITIALIZED:
    case NVML_ERROR_DRIVER_NOT_LOADED:
    case NVML_ERROR_TIMEOUT:
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
    case NVML_ERROR_UNKNOWN: return Unavailable(msg);
    case NVML_ERROR_NO_PERMISSION: return PermissionDenied(msg);
    default: return Internal(msg);
  }
}

Result<NvmlLibrary::Session> NvmlLibrary::Open() const {
  std::shared_lock loaded(load_mu_);
  nvmlReturn_t rc = api_.Init();
  if (rc != NVML_SUCCESS) {
    Status s = Error("nvmlInit_v2", rc);
    // Init failing is almost always the driver not being ready yet.
    return Unavailable(s.message() + " (is the NVIDIA driver loaded? retrying later)");
  }
  return Session(this, std::move(loaded));
}

}  // namespace nvdra::devices
