#include "devices/nvml/nvml_library.h"

#include <dlfcn.h>

namespace nvdra::devices {

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
  NvmlApi& a = lib->api_;
  resolve(a.Init, "nvmlInit_v2", true);
  resolve(a.Shutdown, "nvmlShutdown", true);
  resolve(a.ErrorString, "nvmlErrorString", true);
  resolve(a.SystemGetDriverVersion, "nvmlSystemGetDriverVersion", true);
  resolve(a.SystemGetCudaDriverVersion, "nvmlSystemGetCudaDriverVersion", true);
  resolve(a.DeviceGetCount, "nvmlDeviceGetCount_v2", true);
  resolve(a.DeviceGetHandleByIndex, "nvmlDeviceGetHandleByIndex_v2", true);
  resolve(a.DeviceGetMinorNumber, "nvmlDeviceGetMinorNumber", true);
  resolve(a.DeviceGetUUID, "nvmlDeviceGetUUID", true);
  resolve(a.DeviceGetName, "nvmlDeviceGetName", true);
  resolve(a.DeviceGetBrand, "nvmlDeviceGetBrand", true);
  resolve(a.DeviceGetArchitecture, "nvmlDeviceGetArchitecture", true);
  resolve(a.DeviceGetCudaComputeCapability, "nvmlDeviceGetCudaComputeCapability", true);
  resolve(a.DeviceGetPciInfo, "nvmlDeviceGetPciInfo_v3", true);
  resolve(a.DeviceGetMemoryInfo, "nvmlDeviceGetMemoryInfo", true);
  resolve(a.DeviceGetMigMode, "nvmlDeviceGetMigMode", true);
  resolve(a.DeviceGetMaxMigDeviceCount, "nvmlDeviceGetMaxMigDeviceCount", true);
  resolve(a.DeviceGetMigDeviceHandleByIndex, "nvmlDeviceGetMigDeviceHandleByIndex", true);
  resolve(a.DeviceGetGpuInstanceId, "nvmlDeviceGetGpuInstanceId", true);
  resolve(a.DeviceGetComputeInstanceId, "nvmlDeviceGetComputeInstanceId", true);
  resolve(a.DeviceGetGpuInstanceById, "nvmlDeviceGetGpuInstanceById", true);
  resolve(a.GpuInstanceGetInfo, "nvmlGpuInstanceGetInfo", true);
  resolve(a.GpuInstanceGetComputeInstanceById, "nvmlGpuInstanceGetComputeInstanceById", true);
  resolve(a.ComputeInstanceGetInfo, "nvmlComputeInstanceGetInfo_v2", true);
  resolve(a.DeviceGetGpuInstanceProfileInfoV, "nvmlDeviceGetGpuInstanceProfileInfoV", true);
  resolve(a.DeviceGetHandleByUUID, "nvmlDeviceGetHandleByUUID", true);
  resolve(a.DeviceSetMigMode, "nvmlDeviceSetMigMode", true);
  resolve(a.DeviceGetGpuInstancePossiblePlacements, "nvmlDeviceGetGpuInstancePossiblePlacements_v2", true);
  resolve(a.DeviceCreateGpuInstanceWithPlacement, "nvmlDeviceCreateGpuInstanceWithPlacement", true);
  resolve(a.DeviceGetGpuInstances, "nvmlDeviceGetGpuInstances", true);
  resolve(a.GpuInstanceGetComputeInstanceProfileInfo, "nvmlGpuInstanceGetComputeInstanceProfileInfo", true);
  resolve(a.GpuInstanceCreateComputeInstance, "nvmlGpuInstanceCreateComputeInstance", true);
  resolve(a.GpuInstanceGetComputeInstances, "nvmlGpuInstanceGetComputeInstances", true);
  resolve(a.ComputeInstanceDestroy, "nvmlComputeInstanceDestroy", true);
  resolve(a.GpuInstanceDestroy, "nvmlGpuInstanceDestroy", true);
  resolve(a.EventSetCreate, "nvmlEventSetCreate", true);
  resolve(a.EventSetFree, "nvmlEventSetFree", true);
  resolve(a.EventSetWait, "nvmlEventSetWait_v2", true);
  resolve(a.DeviceRegisterEvents, "nvmlDeviceRegisterEvents", true);
  resolve(a.DeviceGetSupportedEventTypes, "nvmlDeviceGetSupportedEventTypes", true);
  resolve(a.DeviceGetGpuFabricInfo, "nvmlDeviceGetGpuFabricInfo", false);
  resolve(a.DeviceGetAddressingMode, "nvmlDeviceGetAddressingMode", false);
  resolve(a.DeviceGetPersistenceMode, "nvmlDeviceGetPersistenceMode", false);
  resolve(a.DeviceSetPersistenceMode, "nvmlDeviceSetPersistenceMode", false);
  resolve(a.DeviceGetModuleId, "nvmlDeviceGetModuleId", false);
  if (!missing.empty()) {
    return FailedPrecondition("NVML library " + path + " lacks required symbols: " + missing +
                              " (driver too old, or not libnvidia-ml)");
  }
  return lib;
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
    case NVML_ERROR_UNKNOWN:
      return Unavailable(msg);
    case NVML_ERROR_NO_PERMISSION:
      return PermissionDenied(msg);
    default:
      return Internal(msg);
  }
}

Result<NvmlLibrary::Session> NvmlLibrary::Open() const {
  nvmlReturn_t rc = api_.Init();
  if (rc != NVML_SUCCESS) {
    Status s = Error("nvmlInit_v2", rc);
    // Init failing is almost always the driver not being ready yet.
    return Unavailable(s.message() + " (is the NVIDIA driver loaded? retrying later)");
  }
  return Session(this);
}

}  // namespace nvdra::devices
