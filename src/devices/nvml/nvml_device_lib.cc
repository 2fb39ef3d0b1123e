#include "devices/nvml/nvml_device_lib.h"

#include <dirent.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>

#include "devices/nvcaps.h"
#include "devices/nvidia_smi_control.h"
#include "devices/nvml/nvfm_fabric_manager.h"
#include "devices/nvml/nvml_gpu_control.h"
#include "devices/pcie_root.h"
#include "util/file_util.h"
#include "util/log.h"
#include "util/run_guarded.h"
#include "util/thread_name.h"

namespace nvdra::devices {

std::string NvmlBrandName(int brand) {
  static const char* kNames[] = {
      "Unknown",   "Quadro",      "Tesla",     "NVS",        "Grid",      "GeForce",
      "Titan",     "NvidiaVApps", "NvidiaVPC", "NvidiaVCS",  "NvidiaVWS", "NvidiaCloudGaming",
      "QuadroRTX", "NvidiaRTX",   "Nvidia",    "GeForceRTX", "TitanRTX"};
  if (brand < 0 || brand >= static_cast<int>(std::size(kNames))) return "Unknown";
  return kNames[brand];
}

std::string NvmlArchitectureName(unsigned arch) {
  switch (arch) {
    case 2: return "Kepler";
    case 3: return "Maxwell";
    case 4: return "Pascal";
    case 5: return "Volta";
    case 6: return "Turing";
    case 7: return "Ampere";
    case 8: return "Ada Lovelace";
    case 9: return "Hopper";
    case 10: return "Blackwell";
    default: return "Unknown";
  }
}

std::string NormalizePciBusId(const std::string& nvml_bus_id) {
  std::string s;
  for (char c : nvml_bus_id) s.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  // NVML pads the domain to 8 digits; sysfs and Kubernetes use 4.
  auto colon = s.find(':');
  if (colon == 8 && s.compare(0, 4, "0000") == 0) s = s.substr(4);
  return s;
}

std::string FormatUuidBytes(const unsigned char b[16]) {
  char out[37];
  std::snprintf(out, sizeof out, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return out;
}

namespace {

std::string DefaultProcDevices(const DeviceLibOptions& o) {
  return o.proc_devices_path.empty() ? "/proc/devices" : o.proc_devices_path;
}

// True when a /dev/nvidia<N> node exists: the hardware is there even if NVML
// reports no GPU, so an empty list would be a lie.
bool AnyGpuNodeExists(const DriverRoot& root) {
  auto names = ListDirectory(root.ContainerDevPath("/dev"));
  if (!names.ok()) return false;
  for (const auto& n : *names) {
    if (n.size() > 6 && n.compare(0, 6, "nvidia") == 0 && std::all_of(n.begin() + 6, n.end(), ::isdigit)) {
      return true;
    }
  }
  return false;
}

// The profile name from NVML's "MIG 1g.10gb" (or "MIG 1g.10gb+me").
std::string ProfileFromNvmlName(const char* name, const nvmlGpuInstanceProfileInfo_v2_t& info) {
  std::string n = name;
  if (n.rfind("MIG ", 0) == 0) n = n.substr(4);
  if (!n.empty()) return n;
  return std::to_string(info.sliceCount) + "g." + std::to_string((info.memorySizeMB + 1023) / 1024) + "gb";
}

}  // namespace

Result<std::unique_ptr<NvmlDeviceLib>> NvmlDeviceLib::Open(const DeviceLibOptions& options) {
  DriverRoot root(options.container_driver_root, options.host_driver_root);
  auto path = root.FindLibrary("libnvidia-ml.so.1");
  // The driver is often installed after the plugin starts (driver
  // container, GPU operator): a missing library is worth retrying.
  if (!path.ok()) return Unavailable(path.status().message());
  NVDRA_ASSIGN_OR_RETURN(auto lib, NvmlLibrary::Load(*path));
  auto self = std::unique_ptr<NvmlDeviceLib>(new NvmlDeviceLib(root, std::move(lib), options));
  NVDRA_ASSIGN_OR_RETURN(self->xids_, XidPolicy::WithAdditional(options.additional_xids_to_ignore));
  return self;
}

NvmlDeviceLib::NvmlDeviceLib(DriverRoot root, std::unique_ptr<NvmlLibrary> lib, DeviceLibOptions options)
    : root_(std::move(root)),
      lib_(std::move(lib)),
      options_(std::move(options)),
      proc_devices_(DefaultProcDevices(options_)),
      pci_(std::make_unique<SysfsPciDriverControl>(options_.sysfs_root)) {
  auto smi = root_.FindBinary("nvidia-smi");
  control_ = std::make_unique<NvmlGpuControl>(
      lib_.get(), std::make_unique<NvidiaSmiControl>(smi.ok() ? *smi : root_.container_root() + "/usr/bin/nvidia-smi",
                                                     lib_->path()));
}

void NvmlDeviceLib::ReleaseDriver() {
  MutexLock l(mu_);
  lib_->Unload();
}

Status NvmlDeviceLib::AcquireDriver() {
  MutexLock l(mu_);
  if (lib_->loaded()) return Status::Ok();
  auto path = root_.FindLibrary("libnvidia-ml.so.1");
  if (!path.ok()) return Unavailable(path.status().message());
  return lib_->Reload(*path);
}

Result<std::unique_ptr<FabricManager>> NvmlDeviceLib::OpenFabricManager() {
  // /proc/driver and /sys/class are the kernel's, the same in any container.
  auto fabric = HasFabricManagerFabric("/proc", options_.sysfs_root);
  if (!fabric.ok()) return fabric.status().Wrap("FabricManagerPartitioning enabled but fabric detection failed");
  if (!*fabric) {
    NVDRA_INFO("FabricManagerPartitioning enabled but no NVSwitch/NVLink5 fabric detected on this node; "
               "skipping Fabric Manager");
    return std::unique_ptr<FabricManager>();
  }
  auto path = root_.FindLibrary("libnvfm.so");
  if (!path.ok()) path = root_.FindLibrary("libnvfm.so.1");
  if (!path.ok()) {
    return FailedPrecondition("FabricManagerPartitioning enabled but fabric manager library not found: " +
                              path.status().message());
  }
  auto fm = NvfmFabricManager::Load(*path, NvfmConnectOptionsFromEnv(root_.container_root(), ::getenv));
  if (!fm.ok()) {
    return fm.status().Wrap("FabricManagerPartitioning enabled but Fabric Manager could not be opened");
  }
  NVDRA_INFO("Fabric Manager library {} loaded; FM partition attributes enabled", *path);
  return std::unique_ptr<FabricManager>(std::move(fm).value());
}

std::string NvmlDeviceLib::capabilities_dir() const {
  // With an alternative /proc/devices (a fake driver root) the capability
  // files live under the driver root too, as upstream does.
  if (!options_.proc_devices_path.empty()) return JoinPath(root_.container_root(), kCapabilitiesDir);
  return kCapabilitiesDir;
}

Result<NodeInventory> NvmlDeviceLib::Discover() {
  MutexLock l(mu_);
  const NvmlApi& a = lib_->api();
  NVDRA_ASSIGN_OR_RETURN(auto session, lib_->Open());
  NodeInventory inv;
  char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  nvmlReturn_t rc = a.SystemGetDriverVersion(buf, sizeof buf);
  if (rc != NVML_SUCCESS) return lib_->Error("nvmlSystemGetDriverVersion", rc);
  inv.driver_version = buf;
  int cuda = 0;
  rc = a.SystemGetCudaDriverVersion(&cuda);
  if (rc != NVML_SUCCESS) return lib_->Error("nvmlSystemGetCudaDriverVersion", rc);
  inv.cuda_driver_version = std::to_string(cuda / 1000) + "." + std::to_string((cuda % 1000) / 10);

  unsigned count = 0;
  rc = a.DeviceGetCount(&count);
  if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceGetCount_v2", rc);
  if (count == 0 && AnyGpuNodeExists(root_)) {
    return Unavailable("NVML reports no GPUs but /dev/nvidia<N> nodes exist under " + root_.ContainerDevRoot() +
                       "; the driver is probably not ready, retrying");
  }
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t dev = nullptr;
    rc = a.DeviceGetHandleByIndex(i, &dev);
    if (rc != NVML_SUCCESS)
      return lib_->Error("nvmlDeviceGetHandleByIndex_v2", rc).Wrap("GPU index " + std::to_string(i));
    auto gpu = DiscoverGpu(dev, inv.driver_version, inv.cuda_driver_version);
    if (!gpu.ok()) return gpu.status().Wrap("GPU index " + std::to_string(i));
    inv.gpus.push_back(std::move(*gpu));
  }
  std::sort(inv.gpus.begin(), inv.gpus.end(), [](const GpuInfo& x, const GpuInfo& y) { return x.minor < y.minor; });
  // All GPUs of a node are in one clique or none; a GPU whose fabric is not
  // up yet does not count here (the ComputeDomain plugin decides about it).
  std::set<std::string> cliques;
  bool fabric_down = false;
  for (const auto& g : inv.gpus) {
    bool down = g.fabric && g.fabric->supported && !(g.fabric->completed && g.fabric->healthy);
    fabric_down |= down;
    if (!down) cliques.insert(g.clique_id);
  }
  if (cliques.size() > 1) {
    std::string list;
    for (const auto& c : cliques) list += (list.empty() ? "" : ", ") + (c.empty() ? "<none>" : c);
    return FailedPrecondition("GPUs disagree on their NVLink clique (" + list + "); check the fabric manager");
  }
  if (!cliques.empty() && !fabric_down) inv.clique_id = *cliques.begin();
  return inv;
}

Result<GpuInfo> NvmlDeviceLib::DiscoverGpu(nvmlDevice_t dev, const std::string& driver_version,
                                           const std::string& cuda_version) {
  const NvmlApi& a = lib_->api();
  GpuInfo g;
  g.driver_version = driver_version;
  g.cuda_driver_version = cuda_version;
  unsigned minor = 0;
  nvmlReturn_t rc = a.DeviceGetMinorNumber(dev, &minor);
  if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceGetMinorNumber", rc);
  g.minor = static_cast<int>(minor);
  char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  rc = a.DeviceGetUUID(dev, text, sizeof text);
  if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceGetUUID", rc);
  g.uuid = text;
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  rc = a.DeviceGetName(dev, name, sizeof name);
  if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceGetName", rc);
  g.product_name = name;
  int brand = 0;
  rc = a.DeviceGetBrand(dev, &brand);
  if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceGetBrand", rc);
  g.brand = NvmlBrandName(brand);
  unsigned arch = 0;
  rc = a.DeviceGetArchitecture(dev, &arch);
  if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceGetArchitecture", rc);
  g.architecture = NvmlArchitectureName(arch);
  int major = 0, cc_minor = 0;
  rc = a.DeviceGetCudaComputeCapability(dev, &major, &cc_minor);
  if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceGetCudaComputeCapability", rc);
  g.cuda_compute_capability = std::to_string(major) + "." + std::to_string(cc_minor);
  nvmlPciInfo_t pci{};
  rc = a.DeviceGetPciInfo(dev, &pci);
  if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceGetPciInfo_v3", rc);
  pci.busId[sizeof pci.busId - 1] = '\0';
  g.pci_bus_id = NormalizePciBusId(pci.busId);
  g.pcie_root = PcieRootForBusId(options_.sysfs_root, g.pci_bus_id);
  g.numa_node = NumaNodeForBusId(options_.sysfs_root, g.pci_bus_id);
  nvmlMemory_t mem{};
  rc = a.DeviceGetMemoryInfo(dev, &mem);
  if (rc == NVML_SUCCESS) {
    g.memory_bytes = mem.total;
  } else if (rc != NVML_ERROR_NOT_SUPPORTED) {
    return lib_->Error("nvmlDeviceGetMemoryInfo", rc);
  }
  if (a.DeviceGetAddressingMode != nullptr) {
    nvmlDeviceAddressingMode_t mode{};
    mode.version = nvmlDeviceAddressingMode_v1;
    if (a.DeviceGetAddressingMode(dev, &mode) == NVML_SUCCESS) {
      static const char* kModes[] = {"None", "HMM", "ATS"};
      if (mode.value < 3) g.addressing_mode = kModes[mode.value];
    }
  }
  // Fabric Manager names GPUs by it; 0 is no module id, as upstream reads it.
  if (unsigned module = 0;
      a.DeviceGetModuleId != nullptr && a.DeviceGetModuleId(dev, &module) == NVML_SUCCESS && module != 0) {
    g.module_id = static_cast<int>(module);
  }
  unsigned current = 0, pending = 0;
  rc = a.DeviceGetMigMode(dev, &current, &pending);
  if (rc == NVML_SUCCESS) {
    g.mig_enabled = current == NVML_DEVICE_MIG_ENABLE;
    NVDRA_RETURN_IF_ERROR(DiscoverMigProfiles(dev, g));
  } else if (rc != NVML_ERROR_NOT_SUPPORTED) {
    return lib_->Error("nvmlDeviceGetMigMode", rc);
  }
  if (g.mig_enabled) NVDRA_RETURN_IF_ERROR(DiscoverMigs(dev, g));
  NVDRA_RETURN_IF_ERROR(DiscoverFabric(dev, g));
  return g;
}

// The GPU's NVLink fabric state and, when the fabric is up, its clique.
Status NvmlDeviceLib::DiscoverFabric(nvmlDevice_t dev, GpuInfo& g) {
  const NvmlApi& a = lib_->api();
  if (a.DeviceGetGpuFabricInfo == nullptr) return Status::Ok();
  nvmlGpuFabricInfo_t fabric{};
  nvmlReturn_t rc = a.DeviceGetGpuFabricInfo(dev, &fabric);
  FabricReading r;
  if (rc == NVML_SUCCESS) {
    static const unsigned char kZero[16] = {};
    if (std::memcmp(fabric.clusterUuid, kZero, 16) != 0) r.cluster_uuid = FormatUuidBytes(fabric.clusterUuid);
    r.clique_id = fabric.cliqueId;
    r.completed = fabric.state == NVML_GPU_FABRIC_STATE_COMPLETED;
    r.healthy = fabric.status == NVML_SUCCESS;
    r.detail = "state " + std::to_string(fabric.state) + ", status " + lib_->ErrorText("fabric", fabric.status);
    // Whether a fabric that is not up is fatal is the ComputeDomain
    // plugin's policy (CrashOnNVLinkFabricErrors); here it is no clique.
    if (!r.cluster_uuid.empty() && r.completed && r.healthy) {
      g.clique_id = r.cluster_uuid + "." + std::to_string(r.clique_id);
    }
    g.fabric = std::move(r);
  } else if (rc == NVML_ERROR_NOT_SUPPORTED) {
    r.supported = false;
    g.fabric = std::move(r);
  } else {
    return lib_->Error("nvmlDeviceGetGpuFabricInfo", rc);
  }
  return Status::Ok();
}

// The MIG profiles the GPU can create and their placements, as upstream's
// inspectMigProfilesAndPlacements finds them: every GPU instance profile
// NVML knows for the GPU, with the compute instance spanning all of it.
Status NvmlDeviceLib::DiscoverMigProfiles(nvmlDevice_t dev, GpuInfo& gpu) {
  const NvmlApi& a = lib_->api();
  for (unsigned idx = 0; idx < NVML_GPU_INSTANCE_PROFILE_COUNT; ++idx) {
    nvmlGpuInstanceProfileInfo_v2_t info{};
    info.version = nvmlGpuInstanceProfileInfo_v2;
    nvmlReturn_t rc = a.DeviceGetGpuInstanceProfileInfoV(dev, idx, &info);
    if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_INVALID_ARGUMENT) continue;
    if (rc != NVML_SUCCESS) {
      return lib_->Error("nvmlDeviceGetGpuInstanceProfileInfoV", rc)
          .Wrap("GPU instance profile " + std::to_string(idx));
    }
    std::optional<unsigned> ci = FullSpanComputeInstanceProfile(info.sliceCount);
    if (!ci) continue;
    unsigned count = 0;
    rc = a.DeviceGetGpuInstancePossiblePlacements(dev, info.id, nullptr, &count);
    if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_INVALID_ARGUMENT) continue;
    if (rc != NVML_SUCCESS) {
      return lib_->Error("nvmlDeviceGetGpuInstancePossiblePlacements_v2", rc)
          .Wrap("GPU instance profile " + std::to_string(info.id));
    }
    std::vector<nvmlGpuInstancePlacement_t> placements(count);
    if (count > 0) {
      rc = a.DeviceGetGpuInstancePossiblePlacements(dev, info.id, placements.data(), &count);
      if (rc != NVML_SUCCESS) {
        return lib_->Error("nvmlDeviceGetGpuInstancePossiblePlacements_v2", rc)
            .Wrap("GPU instance profile " + std::to_string(info.id));
      }
    }
    MigProfileInfo p;
    p.profile = ProfileFromNvmlName(info.name, info);
    p.gi_profile_id = static_cast<int>(info.id);
    p.ci_profile_id = static_cast<int>(*ci);
    p.multiprocessors = static_cast<int>(info.multiprocessorCount);
    p.copy_engines = static_cast<int>(info.copyEngineCount);
    p.decoders = static_cast<int>(info.decoderCount);
    p.encoders = static_cast<int>(info.encoderCount);
    p.jpeg_engines = static_cast<int>(info.jpegCount);
    p.ofa_engines = static_cast<int>(info.ofaCount);
    p.memory_bytes = info.memorySizeMB << 20;
    for (unsigned i = 0; i < std::min<size_t>(count, placements.size()); ++i) {
      p.placements.push_back({static_cast<int>(placements[i].start), static_cast<int>(placements[i].size)});
    }
    if (!p.placements.empty()) gpu.mig_profiles.push_back(std::move(p));
  }
  return Status::Ok();
}

Status NvmlDeviceLib::DiscoverMigs(nvmlDevice_t dev, GpuInfo& gpu) {
  const NvmlApi& a = lib_->api();
  // GI profile id -> profile info, for names and engine counts.
  std::map<unsigned, nvmlGpuInstanceProfileInfo_v2_t> profiles;
  for (unsigned idx = 0; idx < NVML_GPU_INSTANCE_PROFILE_COUNT; ++idx) {
    nvmlGpuInstanceProfileInfo_v2_t info{};
    info.version = nvmlGpuInstanceProfileInfo_v2;
    if (a.DeviceGetGpuInstanceProfileInfoV(dev, idx, &info) == NVML_SUCCESS) profiles[info.id] = info;
  }
  unsigned max = 0;
  nvmlReturn_t rc = a.DeviceGetMaxMigDeviceCount(dev, &max);
  if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceGetMaxMigDeviceCount", rc);
  for (unsigned i = 0; i < max; ++i) {
    nvmlDevice_t mig = nullptr;
    rc = a.DeviceGetMigDeviceHandleByIndex(dev, i, &mig);
    if (rc == NVML_ERROR_NOT_FOUND || rc == NVML_ERROR_INVALID_ARGUMENT) continue;  // empty slot
    if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceGetMigDeviceHandleByIndex", rc);
    MigDeviceInfo m;
    m.parent_minor = gpu.minor;
    m.parent_uuid = gpu.uuid;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    rc = a.DeviceGetUUID(mig, uuid, sizeof uuid);
    if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceGetUUID (MIG)", rc);
    m.uuid = uuid;
    unsigned gi_id = 0, ci_id = 0;
    rc = a.DeviceGetGpuInstanceId(mig, &gi_id);
    if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceGetGpuInstanceId", rc);
    rc = a.DeviceGetComputeInstanceId(mig, &ci_id);
    if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceGetComputeInstanceId", rc);
    m.gi_id = static_cast<int>(gi_id);
    m.ci_id = static_cast<int>(ci_id);
    nvmlGpuInstance_t gi = nullptr;
    rc = a.DeviceGetGpuInstanceById(dev, gi_id, &gi);
    if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceGetGpuInstanceById", rc);
    nvmlGpuInstanceInfo_t gi_info{};
    rc = a.GpuInstanceGetInfo(gi, &gi_info);
    if (rc != NVML_SUCCESS) return lib_->Error("nvmlGpuInstanceGetInfo", rc);
    nvmlComputeInstance_t ci = nullptr;
    rc = a.GpuInstanceGetComputeInstanceById(gi, ci_id, &ci);
    if (rc != NVML_SUCCESS) return lib_->Error("nvmlGpuInstanceGetComputeInstanceById", rc);
    nvmlComputeInstanceInfo_t ci_info{};
    rc = a.ComputeInstanceGetInfo(ci, &ci_info);
    if (rc != NVML_SUCCESS) return lib_->Error("nvmlComputeInstanceGetInfo_v2", rc);
    m.gi_profile_id = static_cast<int>(gi_info.profileId);
    m.ci_profile_id = static_cast<int>(ci_info.profileId);
    m.placement_start = static_cast<int>(gi_info.placement.start);
    m.placement_size = static_cast<int>(gi_info.placement.size);
    auto p = profiles.find(gi_info.profileId);
    if (p == profiles.end()) {
      return Internal("MIG device " + m.uuid + " has GPU instance profile " + std::to_string(gi_info.profileId) +
                      " that NVML does not list for GPU " + gpu.uuid);
    }
    const auto& info = p->second;
    m.profile = ProfileFromNvmlName(info.name, info);
    // A compute instance smaller than its GPU instance is "<c>c.<profile>".
    if (ci_info.placement.size > 0 && ci_info.placement.size < info.sliceCount) {
      m.profile = std::to_string(ci_info.placement.size) + "c." + m.profile;
    }
    m.multiprocessors = static_cast<int>(info.multiprocessorCount);
    m.copy_engines = static_cast<int>(info.copyEngineCount);
    m.decoders = static_cast<int>(info.decoderCount);
    m.encoders = static_cast<int>(info.encoderCount);
    m.jpeg_engines = static_cast<int>(info.jpegCount);
    m.ofa_engines = static_cast<int>(info.ofaCount);
    m.memory_bytes = info.memorySizeMB << 20;
    gpu.migs.push_back(std::move(m));
  }
  std::sort(gpu.migs.begin(), gpu.migs.end(), [](const MigDeviceInfo& x, const MigDeviceInfo& y) {
    return std::tie(x.gi_id, x.ci_id) < std::tie(y.gi_id, y.ci_id);
  });
  if (gpu.migs.empty()) {
    NVDRA_WARN("GPU {} has MIG enabled but no MIG devices; nothing is published for it", gpu.uuid);
  }
  return Status::Ok();
}

std::unique_ptr<DeviceHealthSource> NvmlDeviceLib::NewHealthSource() {
  return std::make_unique<XidWatcher>(lib_.get(), xids_);
}

XidWatcher::XidWatcher(const NvmlLibrary* lib, XidPolicy policy) : lib_(lib), policy_(std::move(policy)) {}

XidWatcher::~XidWatcher() { Stop(); }

void XidWatcher::Emit(const GpuInfo& gpu, std::optional<int> gi, std::optional<int> ci, HealthState state,
                      std::optional<uint64_t> xid, const std::string& message) {
  for (const auto& name : AffectedDevices(gpu, gi, ci)) {
    callback_(DeviceHealthEvent{name, state, xid, message});
  }
}

Status XidWatcher::Register(const NodeInventory& inventory, HealthCallback callback) {
  const NvmlApi& a = lib_->api();
  inventory_ = inventory;
  callback_ = std::move(callback);
  NVDRA_ASSIGN_OR_RETURN(auto session, lib_->Open());
  session_.emplace(std::move(session));
  nvmlReturn_t rc = a.EventSetCreate(&set_);
  if (rc != NVML_SUCCESS) return lib_->Error("nvmlEventSetCreate", rc);
  unsigned count = 0;
  rc = a.DeviceGetCount(&count);
  if (rc != NVML_SUCCESS) return lib_->Error("nvmlDeviceGetCount_v2", rc);
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t dev = nullptr;
    unsigned minor = 0;
    if (a.DeviceGetHandleByIndex(i, &dev) != NVML_SUCCESS || a.DeviceGetMinorNumber(dev, &minor) != NVML_SUCCESS) {
      continue;
    }
    auto it = std::find_if(inventory_.gpus.begin(), inventory_.gpus.end(),
                           [&](const GpuInfo& g) { return g.minor == static_cast<int>(minor); });
    if (it == inventory_.gpus.end()) continue;
    gpu_by_handle_[dev] = static_cast<size_t>(it - inventory_.gpus.begin());
    unsigned long long supported = 0;
    rc = a.DeviceGetSupportedEventTypes(dev, &supported);
    unsigned long long mask = nvmlEventTypeXidCriticalError | nvmlEventTypeDoubleBitEccError |
                              nvmlEventTypeSingleBitEccError;
    if (rc == NVML_SUCCESS) rc = a.DeviceRegisterEvents(dev, mask & supported, set_);
    if (rc != NVML_SUCCESS) {
      Emit(*it, std::nullopt, std::nullopt, HealthState::kUnmonitored, std::nullopt,
           "health events not available: " + lib_->ErrorText("nvmlDeviceRegisterEvents", rc));
    }
  }
  return Status::Ok();
}

bool XidWatcher::PollOnce(unsigned timeout_ms) {
  nvmlEventData_t data{};
  nvmlReturn_t rc = lib_->api().EventSetWait(set_, &data, timeout_ms);
  if (rc == NVML_ERROR_TIMEOUT) return true;
  if (rc == NVML_ERROR_GPU_IS_LOST) {
    for (const auto& g : inventory_.gpus) {
      Emit(g, std::nullopt, std::nullopt, HealthState::kUnhealthy, std::nullopt, "GPU lost");
    }
    return true;
  }
  if (rc != NVML_SUCCESS) {
    NVDRA_WARN("NVML event wait failed: {}", lib_->ErrorText("nvmlEventSetWait_v2", rc));
    return false;
  }
  if (data.eventType != nvmlEventTypeXidCriticalError) return true;
  auto it = gpu_by_handle_.find(data.device);
  if (it == gpu_by_handle_.end()) return true;
  const GpuInfo& gpu = inventory_.gpus[it->second];
  std::optional<int> gi, ci;
  if (data.gpuInstanceId != NVML_INVALID_INSTANCE_ID) gi = static_cast<int>(data.gpuInstanceId);
  if (data.computeInstanceId != NVML_INVALID_INSTANCE_ID) ci = static_cast<int>(data.computeInstanceId);
  uint64_t xid = data.eventData;
  bool critical = policy_.IsCritical(xid);
  Emit(gpu, gi, ci, critical ? HealthState::kUnhealthy : HealthState::kNotice, xid,
       "XID " + std::to_string(xid) + (critical ? " (critical)" : " (ignored)"));
  return true;
}

Status XidWatcher::Start(const NodeInventory& inventory, HealthCallback callback) {
  if (thread_.joinable()) return FailedPrecondition("XID watcher already started");
  NVDRA_RETURN_IF_ERROR(Register(inventory, std::move(callback)));
  stop_ = false;
  thread_ = std::thread([this] {
    SetThreadName("xid-watch");
    while (!stop_.load()) {
      // An exception (from NVML data or the callback) ends the watch like an
      // unusable event set does, logged, instead of ending the process.
      Result<bool> more = RunGuarded("the XID watcher", [this] { return PollOnce(1000); });
      if (!more.ok() || !*more) break;
    }
  });
  return Status::Ok();
}

void XidWatcher::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (set_ != nullptr) {
    lib_->api().EventSetFree(set_);
    set_ = nullptr;
  }
  session_.reset();
}

}  // namespace nvdra::devices
