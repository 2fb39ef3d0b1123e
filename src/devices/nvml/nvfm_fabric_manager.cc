#include "devices/nvml/nvfm_fabric_manager.h"

#include <dlfcn.h>

#include <cstring>

#include "util/file_util.h"
#include "util/log.h"

namespace nvdra::devices {

namespace {

// A C string from a fixed array that may lack its NUL.
std::string FromArray(const char* chars, size_t size) { return std::string(chars, ::strnlen(chars, size)); }

// A count Fabric Manager reports beyond its array means the library and
// these declarations disagree (or FM is broken): failing beats reading a
// truncated partition that could then match a subset of a larger one.
Status CheckCount(unsigned n, unsigned max, const std::string& what) {
  if (n <= max) return Status::Ok();
  return Internal(what + ": FM reported " + std::to_string(n) + " but the array only holds " + std::to_string(max) +
                  "; the runtime libnvfm likely disagrees with the declared layout");
}

}  // namespace

std::string FmReturnName(fmReturn_t rc) {
  static const char* kNames[] = {"SUCCESS",
                                 "BADPARAM",
                                 "GENERIC_ERROR",
                                 "NOT_SUPPORTED",
                                 "UNINITIALIZED",
                                 "TIMEOUT",
                                 "VERSION_MISMATCH",
                                 "IN_USE",
                                 "NOT_CONFIGURED",
                                 "CONNECTION_NOT_VALID",
                                 "NVLINK_ERROR",
                                 "RESOURCE_BAD",
                                 "RESOURCE_IN_USE",
                                 "RESOURCE_NOT_IN_USE",
                                 "RESOURCE_EXHAUSTED",
                                 "RESOURCE_NOT_READY",
                                 "PARTITION_EXISTS",
                                 "PARTITION_ID_IN_USE",
                                 "PARTITION_ID_NOT_IN_USE",
                                 "PARTITION_NAME_IN_USE",
                                 "PARTITION_NAME_NOT_IN_USE",
                                 "PARTITION_ID_NAME_MISMATCH",
                                 "NOT_READY",
                                 "RESOURCE_USED_IN_THIS_PARTITION",
                                 "RESOURCE_USED_IN_ANOTHER_PARTITION",
                                 "PARTITION_MISWIRED_TRUNKS",
                                 "PARTITION_INSUFFICIENT_TRUNKS",
                                 "PARTITION_MISSING_SWITCHES",
                                 "PARTITION_NETWORK_CONFIG_ERROR",
                                 "PARTITION_ROUTE_PROGRAMMING_ERROR"};
  if (rc <= 0 && -rc < static_cast<int>(std::size(kNames))) return kNames[-rc];
  return "unknown return code " + std::to_string(rc);
}

NvfmConnectOptions NvfmConnectOptionsFromEnv(const std::string& container_driver_root,
                                             const std::function<const char*(const char*)>& getenv) {
  NvfmConnectOptions o;
  if (const char* addr = getenv("NVIDIA_FABRICMANAGER_ADDRESS"); addr != nullptr) {
    o.unix_socket = false;
    o.address = *addr != '\0' ? addr : "127.0.0.1";
    return o;
  }
  const char* socket = getenv("NVIDIA_FABRICMANAGER_UNIX_SOCKET");
  o.address = socket != nullptr && *socket != '\0' ? std::string(socket)
                                                   : JoinPath(container_driver_root, "run/nvidia-fabricmanager/socket");
  return o;
}

NvfmFabricManager::~NvfmFabricManager() {
  if (initialized_ && api_.LibShutdown != nullptr) {
    if (fmReturn_t rc = api_.LibShutdown(); rc != FM_ST_SUCCESS) {
      NVDRA_WARN("fabricmanager: fmLibShutdown: {}", FmReturnName(rc));
    }
  }
  if (handle_ != nullptr) ::dlclose(handle_);
}

Result<std::unique_ptr<NvfmFabricManager>> NvfmFabricManager::Load(const std::string& path,
                                                                   NvfmConnectOptions options) {
  std::unique_ptr<NvfmFabricManager> fm(new NvfmFabricManager());
  fm->options_ = std::move(options);
  ::dlerror();
  fm->handle_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (fm->handle_ == nullptr) {
    const char* err = ::dlerror();
    return FailedPrecondition("loading Fabric Manager library " + path + ": " + (err ? err : "unknown dlopen error"));
  }
  std::string missing;
  auto resolve = [&](auto& fn, const char* name) {
    void* sym = ::dlsym(fm->handle_, name);
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(sym);
    if (sym == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(name);
  };
  NvfmApi& a = fm->api_;
  resolve(a.LibInit, "fmLibInit");
  resolve(a.LibShutdown, "fmLibShutdown");
  resolve(a.Connect, "fmConnect");
  resolve(a.Disconnect, "fmDisconnect");
  resolve(a.GetSupportedFabricPartitions, "fmGetSupportedFabricPartitions");
  resolve(a.ActivateFabricPartition, "fmActivateFabricPartition");
  resolve(a.DeactivateFabricPartition, "fmDeactivateFabricPartition");
  if (!missing.empty()) {
    return FailedPrecondition("Fabric Manager library " + path + " lacks required symbols: " + missing);
  }
  if (fmReturn_t rc = a.LibInit(); rc != FM_ST_SUCCESS) {
    return FailedPrecondition("fabricmanager: fmLibInit: fmLibInit: " + FmReturnName(rc));
  }
  fm->initialized_ = true;
  return fm;
}

Status NvfmFabricManager::WithConnection(const char* op, const std::function<fmReturn_t(fmHandle_t)>& call) {
  fmConnectParams_t params{};
  params.version = fmConnectParams_version;
  std::strncpy(params.addressInfo, options_.address.c_str(), sizeof params.addressInfo - 1);
  params.timeoutMs = options_.timeout_ms;
  params.addressIsUnixSocket = options_.unix_socket ? 1 : 0;
  params.addressType = options_.unix_socket ? NV_FM_API_ADDR_TYPE_UNIX : NV_FM_API_ADDR_TYPE_INET;
  fmHandle_t h = nullptr;
  fmReturn_t rc = api_.Connect(&params, &h);
  if (rc == FM_ST_SUCCESS && h == nullptr) rc = FM_ST_GENERIC_ERROR;
  if (rc != FM_ST_SUCCESS) {
    // Fabric Manager not (yet) up is worth a retry.
    return Unavailable(std::string(op) + ": connect failed: fmConnect: " + FmReturnName(rc) + " (" +
                       (options_.unix_socket ? "unix socket " : "address ") + options_.address + ")");
  }
  rc = call(h);
  if (fmReturn_t d = api_.Disconnect(h); d != FM_ST_SUCCESS) {
    NVDRA_WARN("fabricmanager: {}: fmDisconnect: {}", op, FmReturnName(d));
  }
  if (rc == FM_ST_SUCCESS) return Status::Ok();
  const std::string msg = std::string(op) + ": " + FmReturnName(rc);
  if (rc == FM_ST_TIMEOUT || rc == FM_ST_NOT_READY || rc == FM_ST_CONNECTION_NOT_VALID) return Unavailable(msg);
  return Internal(msg);
}

Result<std::vector<FabricPartition>> NvfmFabricManager::Partitions() {
  auto list = std::make_unique<fmFabricPartitionList_t>();
  std::memset(list.get(), 0, sizeof *list);
  list->version = fmFabricPartitionList_version;
  NVDRA_RETURN_IF_ERROR(WithConnection("fmGetSupportedFabricPartitions",
                                       [&](fmHandle_t h) { return api_.GetSupportedFabricPartitions(h, list.get()); }));
  NVDRA_RETURN_IF_ERROR(CheckCount(list->numPartitions, FM_MAX_FABRIC_PARTITIONS, "invalid partition count"));
  std::vector<FabricPartition> out;
  for (unsigned i = 0; i < list->numPartitions; ++i) {
    const fmFabricPartitionInfo_t& p = list->partitionInfo[i];
    NVDRA_RETURN_IF_ERROR(CheckCount(p.numGpus, FM_MAX_NUM_GPUS,
                                     "invalid GPU count for partition " + std::to_string(p.partitionId)));
    FabricPartition part;
    part.id = static_cast<int>(p.partitionId);
    part.active = p.isActive != 0;
    for (unsigned g = 0; g < p.numGpus; ++g) {
      const fmFabricPartitionGpuInfo_t& gi = p.gpuInfo[g];
      part.gpus.push_back({static_cast<int>(gi.physicalId), FromArray(gi.uuid, sizeof gi.uuid),
                           FromArray(gi.pciBusId, sizeof gi.pciBusId)});
    }
    out.push_back(std::move(part));
  }
  return out;
}

Status NvfmFabricManager::Activate(int partition_id) {
  return WithConnection("fmActivateFabricPartition", [&](fmHandle_t h) {
    return api_.ActivateFabricPartition(h, static_cast<fmFabricPartitionId_t>(partition_id));
  });
}

Status NvfmFabricManager::Deactivate(int partition_id) {
  return WithConnection("fmDeactivateFabricPartition", [&](fmHandle_t h) {
    return api_.DeactivateFabricPartition(h, static_cast<fmFabricPartitionId_t>(partition_id));
  });
}

}  // namespace nvdra::devices
