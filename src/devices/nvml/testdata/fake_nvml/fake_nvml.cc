// A stand-in libnvidia-ml.so.1 for tests: exports the NVML symbols nvdra
// uses and answers from a JSON table named by $FAKE_NVML_CONFIG (schema in
// README.md next to this file). Built without FAKE_NVML_WITHOUT_MIG it is
// complete; with it, the MIG symbols are missing.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "devices/nvml/nvml_api.h"

using nlohmann::json;

namespace {

struct FakeMig;
struct FakeDev {
  int tag = 1;
  json spec;
  std::vector<FakeMig*> migs;  // live GPU instances, in creation order
  unsigned mig_mode = 0;       // current (and pending) MIG mode
  int created = 0;             // MIG devices created, for their UUIDs
  int persistence = -1;        // -1: as the spec's "persistenceMode" says (default 1)
};
// A GPU instance and at most one compute instance on it (the MIG device);
// its handle stands for the GPU instance, the compute instance and the MIG
// device alike. Destroyed ones stay allocated: stale handles stay readable.
struct FakeMig {
  int tag = 2;
  FakeDev* parent;
  json spec;  // gi, ci, giProfileId, ciProfileId, placement, ciSlices, uuid
  bool has_ci = true;
  bool alive = true;
};

struct State {
  std::mutex mu;
  int init_count = 0;
  std::string loaded;  // the config text the state was built from
  json config;
  std::vector<FakeDev*> devices;  // leaked on purpose: handles stay valid
  std::deque<json> events;
};

State& S() {
  static State* s = new State();
  return *s;
}

nvmlReturn_t Forced(const char* fn) {
  const json& errs = S().config.value("errors", json::object());
  if (errs.contains(fn)) return errs[fn].get<int>();
  return NVML_SUCCESS;
}

#define FAKE_CHECK(fn)                                    \
  do {                                                    \
    if (S().init_count == 0) return NVML_ERROR_UNINITIALIZED; \
    nvmlReturn_t forced_ = Forced(fn);                    \
    if (forced_ != NVML_SUCCESS) return forced_;          \
  } while (0)

nvmlReturn_t CopyString(const std::string& s, char* buf, unsigned len) {
  if (buf == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (s.size() + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(buf, s.c_str(), s.size() + 1);
  return NVML_SUCCESS;
}

FakeDev* Dev(nvmlDevice_t d) {
  auto* p = reinterpret_cast<FakeDev*>(d);
  return (p != nullptr && p->tag == 1) ? p : nullptr;
}
FakeMig* Mig(nvmlDevice_t d) {
  auto* p = reinterpret_cast<FakeMig*>(d);
  return (p != nullptr && p->tag == 2) ? p : nullptr;
}

// Builds the state from $FAKE_NVML_CONFIG. Like the driver, the state (MIG
// mode, MIG devices) outlives nvmlShutdown: it is rebuilt only when the
// configuration's text changes.
nvmlReturn_t Load() {
  const char* path = std::getenv("FAKE_NVML_CONFIG");
  if (path == nullptr) return NVML_ERROR_DRIVER_NOT_LOADED;
  std::ifstream in(path);
  if (!in) return NVML_ERROR_DRIVER_NOT_LOADED;
  std::stringstream text;
  text << in.rdbuf();
  json cfg;
  try {
    cfg = json::parse(text.str());
  } catch (...) {
    return NVML_ERROR_UNKNOWN;
  }
  if (cfg.value("initError", 0) != 0) return cfg["initError"].get<int>();
  State& s = S();
  if (s.loaded == text.str()) return NVML_SUCCESS;
  s.loaded = text.str();
  s.config = cfg;
  s.devices.clear();
  for (const auto& d : cfg.value("devices", json::array())) {
    auto* dev = new FakeDev{1, d, {}, d.value("migMode", 0u), 0};
    for (const auto& m : d.value("migs", json::array())) {
      dev->migs.push_back(new FakeMig{2, dev, m, !m.value("noComputeInstance", false), true});
    }
    s.devices.push_back(dev);
  }
  s.events.clear();
  for (const auto& e : cfg.value("events", json::array())) s.events.push_back(e);
  return NVML_SUCCESS;
}

FakeMig* Gi(nvmlGpuInstance_t gi) {
  auto* p = reinterpret_cast<FakeMig*>(gi);
  return (p != nullptr && p->tag == 2 && p->alive) ? p : nullptr;
}

const json* GiProfile(const FakeDev* d, unsigned id) {
  if (!d->spec.contains("giProfiles")) return nullptr;
  for (const auto& pj : d->spec["giProfiles"]) {
    if (pj.value("id", 0u) == id) return &pj;
  }
  return nullptr;
}

// NVML_COMPUTE_INSTANCE_PROFILE_<n>_SLICE -> n.
unsigned CiProfileSlices(unsigned profile) {
  static const unsigned kSlices[] = {1, 2, 3, 4, 7, 8, 6, 1};
  return profile < 8 ? kSlices[profile] : 0;
}

bool MigSupported(const FakeDev* d) { return d->spec.contains("migMode"); }

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int fakeNvmlInitCount() { return S().init_count; }

nvmlReturn_t nvmlInit_v2() {
  std::lock_guard<std::mutex> l(S().mu);
  if (S().init_count == 0) {
    nvmlReturn_t rc = Load();
    if (rc != NVML_SUCCESS) return rc;
  }
  S().init_count++;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown() {
  std::lock_guard<std::mutex> l(S().mu);
  if (S().init_count == 0) return NVML_ERROR_UNINITIALIZED;
  S().init_count--;
  return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t rc) {
  switch (rc) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    default: return "Unknown Error";
  }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* buf, unsigned len) {
  FAKE_CHECK("nvmlSystemGetDriverVersion");
  return CopyString(S().config.value("driverVersion", ""), buf, len);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* v) {
  FAKE_CHECK("nvmlSystemGetCudaDriverVersion");
  *v = S().config.value("cudaDriverVersion", 0);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* n) {
  FAKE_CHECK("nvmlDeviceGetCount_v2");
  *n = static_cast<unsigned>(S().devices.size());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t* d) {
  FAKE_CHECK("nvmlDeviceGetHandleByIndex_v2");
  if (i >= S().devices.size()) return NVML_ERROR_INVALID_ARGUMENT;
  *d = reinterpret_cast<nvmlDevice_t>(S().devices[i]);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned* m) {
  FAKE_CHECK("nvmlDeviceGetMinorNumber");
  if (!Dev(d)) return NVML_ERROR_INVALID_ARGUMENT;
  *m = Dev(d)->spec.value("minor", 0u);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* buf, unsigned len) {
  FAKE_CHECK("nvmlDeviceGetUUID");
  if (Dev(d)) return CopyString(Dev(d)->spec.value("uuid", ""), buf, len);
  if (Mig(d)) return CopyString(Mig(d)->spec.value("uuid", ""), buf, len);
  return NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* buf, unsigned len) {
  FAKE_CHECK("nvmlDeviceGetName");
  if (!Dev(d)) return NVML_ERROR_INVALID_ARGUMENT;
  return CopyString(Dev(d)->spec.value("name", ""), buf, len);
}

nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t d, int* b) {
  FAKE_CHECK("nvmlDeviceGetBrand");
  if (!Dev(d)) return NVML_ERROR_INVALID_ARGUMENT;
  *b = Dev(d)->spec.value("brand", 0);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t d, unsigned* a) {
  FAKE_CHECK("nvmlDeviceGetArchitecture");
  if (!Dev(d)) return NVML_ERROR_INVALID_ARGUMENT;
  *a = Dev(d)->spec.value("arch", 0u);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int* major, int* minor) {
  FAKE_CHECK("nvmlDeviceGetCudaComputeCapability");
  if (!Dev(d)) return NVML_ERROR_INVALID_ARGUMENT;
  auto cc = Dev(d)->spec.value("cc", json::array({0, 0}));
  *major = cc[0].get<int>();
  *minor = cc[1].get<int>();
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t* p) {
  FAKE_CHECK("nvmlDeviceGetPciInfo_v3");
  if (!Dev(d)) return NVML_ERROR_INVALID_ARGUMENT;
  std::memset(p, 0, sizeof *p);
  std::string bus = Dev(d)->spec.value("busId", "");
  std::strncpy(p->busId, bus.c_str(), sizeof p->busId - 1);
  std::strncpy(p->busIdLegacy, bus.c_str() + (bus.size() > 12 ? 4 : 0), sizeof p->busIdLegacy - 1);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* m) {
  FAKE_CHECK("nvmlDeviceGetMemoryInfo");
  if (!Dev(d)) return NVML_ERROR_INVALID_ARGUMENT;
  if (!Dev(d)->spec.contains("memoryTotal")) return NVML_ERROR_NOT_SUPPORTED;
  m->total = Dev(d)->spec["memoryTotal"].get<unsigned long long>();
  m->used = 0;
  m->free = m->total;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetAddressingMode(nvmlDevice_t d, nvmlDeviceAddressingMode_t* mode) {
  FAKE_CHECK("nvmlDeviceGetAddressingMode");
  if (!Dev(d) || mode->version != nvmlDeviceAddressingMode_v1) return NVML_ERROR_INVALID_ARGUMENT;
  if (!Dev(d)->spec.contains("addressingMode")) return NVML_ERROR_NOT_SUPPORTED;
  mode->value = Dev(d)->spec["addressingMode"].get<unsigned>();
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetModuleId(nvmlDevice_t d, unsigned int* module) {
  FAKE_CHECK("nvmlDeviceGetModuleId");
  if (!Dev(d) || module == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!Dev(d)->spec.contains("moduleId")) return NVML_ERROR_NOT_SUPPORTED;
  *module = Dev(d)->spec["moduleId"].get<unsigned>();
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t d, nvmlGpuFabricInfo_t* f) {
  FAKE_CHECK("nvmlDeviceGetGpuFabricInfo");
  if (!Dev(d)) return NVML_ERROR_INVALID_ARGUMENT;
  if (!Dev(d)->spec.contains("fabric")) return NVML_ERROR_NOT_SUPPORTED;
  const json& fj = Dev(d)->spec["fabric"];
  std::memset(f, 0, sizeof *f);
  std::string hex;
  for (char c : fj.value("clusterUuid", std::string())) {
    if (c != '-') hex.push_back(c);
  }
  for (size_t i = 0; i < 16 && 2 * i + 1 < hex.size(); ++i) {
    f->clusterUuid[i] = static_cast<unsigned char>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
  }
  f->cliqueId = fj.value("cliqueId", 0u);
  f->state = static_cast<unsigned char>(fj.value("state", 3));
  f->status = fj.value("status", 0);
  return NVML_SUCCESS;
}

#ifndef FAKE_NVML_WITHOUT_MIG
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned* current, unsigned* pending) {
  FAKE_CHECK("nvmlDeviceGetMigMode");
  if (!Dev(d)) return NVML_ERROR_INVALID_ARGUMENT;
  if (!MigSupported(Dev(d))) return NVML_ERROR_NOT_SUPPORTED;
  *current = *pending = Dev(d)->mig_mode;
  return NVML_SUCCESS;
}
#endif

// MIG mode changes at once (a GPU that toggles it without a reset); it
// cannot be disabled while GPU instances exist.
nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t d, unsigned mode, nvmlReturn_t* activation) {
  FAKE_CHECK("nvmlDeviceSetMigMode");
  if (!Dev(d) || mode > 1 || activation == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!MigSupported(Dev(d))) return NVML_ERROR_NOT_SUPPORTED;
  if (mode == 0 && !Dev(d)->migs.empty()) {
    *activation = NVML_ERROR_IN_USE;
    return NVML_ERROR_IN_USE;
  }
  Dev(d)->mig_mode = mode;
  *activation = NVML_SUCCESS;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t d, int* mode) {
  FAKE_CHECK("nvmlDeviceGetPersistenceMode");
  if (!Dev(d) || mode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *mode = Dev(d)->persistence >= 0 ? Dev(d)->persistence : Dev(d)->spec.value("persistenceMode", 1);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceSetPersistenceMode(nvmlDevice_t d, int mode) {
  FAKE_CHECK("nvmlDeviceSetPersistenceMode");
  if (!Dev(d) || mode < 0 || mode > 1) return NVML_ERROR_INVALID_ARGUMENT;
  Dev(d)->persistence = mode;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* d) {
  FAKE_CHECK("nvmlDeviceGetHandleByUUID");
  if (uuid == nullptr || d == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (FakeDev* dev : S().devices) {
    if (dev->spec.value("uuid", "") == uuid) {
      *d = reinterpret_cast<nvmlDevice_t>(dev);
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

// "placements" of a GI profile: [[start, size], ...].
nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t d, unsigned profile_id,
                                                          nvmlGpuInstancePlacement_t* out, unsigned* count) {
  FAKE_CHECK("nvmlDeviceGetGpuInstancePossiblePlacements_v2");
  if (!Dev(d) || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!MigSupported(Dev(d))) return NVML_ERROR_NOT_SUPPORTED;
  const json* p = GiProfile(Dev(d), profile_id);
  if (p == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  json pls = p->value("placements", json::array());
  if (out == nullptr) {
    *count = static_cast<unsigned>(pls.size());
    return NVML_SUCCESS;
  }
  if (*count < pls.size()) {
    *count = static_cast<unsigned>(pls.size());
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (size_t i = 0; i < pls.size(); ++i) out[i] = {pls[i][0].get<unsigned>(), pls[i][1].get<unsigned>()};
  *count = static_cast<unsigned>(pls.size());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t d, unsigned profile_id,
                                                      const nvmlGpuInstancePlacement_t* placement,
                                                      nvmlGpuInstance_t* gi) {
  FAKE_CHECK("nvmlDeviceCreateGpuInstanceWithPlacement");
  FakeDev* dev = Dev(d);
  if (dev == nullptr || placement == nullptr || gi == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!MigSupported(dev) || dev->mig_mode != 1) return NVML_ERROR_NOT_SUPPORTED;
  const json* p = GiProfile(dev, profile_id);
  if (p == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  bool possible = false;
  for (const auto& pl : p->value("placements", json::array())) {
    possible |= pl[0].get<unsigned>() == placement->start && pl[1].get<unsigned>() == placement->size;
  }
  if (!possible) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned id = 1;
  for (bool used = true; used; ) {
    used = false;
    for (const FakeMig* m : dev->migs) {
      auto pl = m->spec.value("placement", json::array({0, 1}));
      unsigned start = pl[0].get<unsigned>(), size = pl[1].get<unsigned>();
      if (start < placement->start + placement->size && placement->start < start + size) {
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
      }
      if (m->spec.value("gi", 0u) == id) used = true;
    }
    if (used) ++id;
  }
  json spec = {{"gi", id}, {"giProfileId", profile_id}, {"placement", {placement->start, placement->size}}};
  auto* m = new FakeMig{2, dev, spec, false, true};
  dev->migs.push_back(m);
  *gi = reinterpret_cast<nvmlGpuInstance_t>(m);
  return NVML_SUCCESS;
}

// GPU instances of a profile; the caller's array holds the profile's
// instanceCount entries.
nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t d, unsigned profile_id, nvmlGpuInstance_t* out, unsigned* count) {
  FAKE_CHECK("nvmlDeviceGetGpuInstances");
  FakeDev* dev = Dev(d);
  if (dev == nullptr || out == nullptr || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!MigSupported(dev) || dev->mig_mode != 1) return NVML_ERROR_NOT_SUPPORTED;
  unsigned n = 0;
  for (FakeMig* m : dev->migs) {
    if (m->spec.value("giProfileId", 0u) == profile_id) out[n++] = reinterpret_cast<nvmlGpuInstance_t>(m);
  }
  *count = n;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gi, unsigned profile, unsigned eng,
                                                          nvmlComputeInstanceProfileInfo_t* info) {
  FAKE_CHECK("nvmlGpuInstanceGetComputeInstanceProfileInfo");
  FakeMig* m = Gi(gi);
  if (m == nullptr || info == nullptr || eng != 0 || profile >= 8) return NVML_ERROR_INVALID_ARGUMENT;
  const json* p = GiProfile(m->parent, m->spec.value("giProfileId", 0u));
  unsigned slices = p ? p->value("slices", 0u) : 0u;
  if (CiProfileSlices(profile) > slices || profile == 7) return NVML_ERROR_NOT_SUPPORTED;
  std::memset(info, 0, sizeof *info);
  info->id = profile;
  info->sliceCount = CiProfileSlices(profile);
  info->instanceCount = slices / info->sliceCount;
  info->multiprocessorCount = p->value("sms", 0u) * info->sliceCount / slices;
  return NVML_SUCCESS;
}

// One compute instance per GPU instance.
nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gi, unsigned profile_id, nvmlComputeInstance_t* ci) {
  FAKE_CHECK("nvmlGpuInstanceCreateComputeInstance");
  FakeMig* m = Gi(gi);
  if (m == nullptr || ci == nullptr || profile_id >= 8) return NVML_ERROR_INVALID_ARGUMENT;
  if (m->has_ci) return NVML_ERROR_INSUFFICIENT_RESOURCES;
  FakeDev* dev = m->parent;
  char uuid[64];
  std::snprintf(uuid, sizeof uuid, "MIG-%08x-0000-4000-8000-%012x", dev->spec.value("minor", 0u),
                static_cast<unsigned>(++dev->created));
  m->spec["ci"] = 0;
  m->spec["ciProfileId"] = profile_id;
  m->spec["ciSlices"] = CiProfileSlices(profile_id);
  m->spec["uuid"] = uuid;
  m->has_ci = true;
  *ci = reinterpret_cast<nvmlComputeInstance_t>(m);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gi, unsigned profile_id, nvmlComputeInstance_t* out,
                                                unsigned* count) {
  FAKE_CHECK("nvmlGpuInstanceGetComputeInstances");
  FakeMig* m = Gi(gi);
  if (m == nullptr || out == nullptr || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = 0;
  if (m->has_ci && m->spec.value("ciProfileId", 0u) == profile_id) out[(*count)++] = reinterpret_cast<nvmlComputeInstance_t>(m);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t ci) {
  FAKE_CHECK("nvmlComputeInstanceDestroy");
  FakeMig* m = Gi(reinterpret_cast<nvmlGpuInstance_t>(ci));
  if (m == nullptr || !m->has_ci) return NVML_ERROR_INVALID_ARGUMENT;
  m->has_ci = false;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gi) {
  FAKE_CHECK("nvmlGpuInstanceDestroy");
  FakeMig* m = Gi(gi);
  if (m == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (m->has_ci) return NVML_ERROR_IN_USE;
  auto& migs = m->parent->migs;
  migs.erase(std::find(migs.begin(), migs.end(), m));
  m->alive = false;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned* n) {
  FAKE_CHECK("nvmlDeviceGetMaxMigDeviceCount");
  if (!Dev(d)) return NVML_ERROR_INVALID_ARGUMENT;
  *n = 7;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned i, nvmlDevice_t* out) {
  FAKE_CHECK("nvmlDeviceGetMigDeviceHandleByIndex");
  if (!Dev(d)) return NVML_ERROR_INVALID_ARGUMENT;
  std::vector<FakeMig*> devices;
  for (FakeMig* m : Dev(d)->migs) {
    if (m->has_ci) devices.push_back(m);
  }
  if (i >= devices.size()) return NVML_ERROR_NOT_FOUND;
  *out = reinterpret_cast<nvmlDevice_t>(devices[i]);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t d, unsigned* id) {
  FAKE_CHECK("nvmlDeviceGetGpuInstanceId");
  if (!Mig(d)) return NVML_ERROR_NOT_SUPPORTED;
  *id = Mig(d)->spec.value("gi", 0u);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t d, unsigned* id) {
  FAKE_CHECK("nvmlDeviceGetComputeInstanceId");
  if (!Mig(d)) return NVML_ERROR_NOT_SUPPORTED;
  *id = Mig(d)->spec.value("ci", 0u);
  return NVML_SUCCESS;
}

// GPU and compute instance handles are the MIG device records themselves.
nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t d, unsigned id, nvmlGpuInstance_t* gi) {
  FAKE_CHECK("nvmlDeviceGetGpuInstanceById");
  if (!Dev(d)) return NVML_ERROR_INVALID_ARGUMENT;
  if (Dev(d)->mig_mode != 1) return NVML_ERROR_NOT_SUPPORTED;
  for (FakeMig* m : Dev(d)->migs) {
    if (m->spec.value("gi", 0u) == id) {
      *gi = reinterpret_cast<nvmlGpuInstance_t>(m);
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gi, nvmlGpuInstanceInfo_t* info) {
  FAKE_CHECK("nvmlGpuInstanceGetInfo");
  auto* m = Gi(gi);
  if (m == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  info->device = reinterpret_cast<nvmlDevice_t>(m->parent);
  info->id = m->spec.value("gi", 0u);
  info->profileId = m->spec.value("giProfileId", 0u);
  auto pl = m->spec.value("placement", json::array({0, 1}));
  info->placement.start = pl[0].get<unsigned>();
  info->placement.size = pl[1].get<unsigned>();
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t gi, unsigned id, nvmlComputeInstance_t* ci) {
  FAKE_CHECK("nvmlGpuInstanceGetComputeInstanceById");
  auto* m = Gi(gi);
  if (m == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!m->has_ci || m->spec.value("ci", 0u) != id) return NVML_ERROR_NOT_FOUND;
  *ci = reinterpret_cast<nvmlComputeInstance_t>(m);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t ci, nvmlComputeInstanceInfo_t* info) {
  FAKE_CHECK("nvmlComputeInstanceGetInfo_v2");
  auto* m = Gi(reinterpret_cast<nvmlGpuInstance_t>(ci));
  if (m == nullptr || !m->has_ci) return NVML_ERROR_INVALID_ARGUMENT;
  // The MIG device handle of the compute instance.
  info->device = reinterpret_cast<nvmlDevice_t>(m);
  info->gpuInstance = reinterpret_cast<nvmlGpuInstance_t>(m);
  info->id = m->spec.value("ci", 0u);
  info->profileId = m->spec.value("ciProfileId", 0u);
  info->placement.start = 0;
  info->placement.size = m->spec.value("ciSlices", 0u);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t d, unsigned index, nvmlGpuInstanceProfileInfo_v2_t* p) {
  FAKE_CHECK("nvmlDeviceGetGpuInstanceProfileInfoV");
  if (!Dev(d) || p->version != nvmlGpuInstanceProfileInfo_v2) return NVML_ERROR_INVALID_ARGUMENT;
  for (const auto& pj : Dev(d)->spec.value("giProfiles", json::array())) {
    if (pj.value("index", 99u) != index) continue;
    p->id = pj.value("id", 0u);
    p->sliceCount = pj.value("slices", 0u);
    p->instanceCount = static_cast<unsigned>(std::max<size_t>(1, pj.value("placements", json::array()).size()));
    p->multiprocessorCount = pj.value("sms", 0u);
    p->copyEngineCount = pj.value("ce", 0u);
    p->decoderCount = pj.value("dec", 0u);
    p->encoderCount = pj.value("enc", 0u);
    p->jpegCount = pj.value("jpeg", 0u);
    p->ofaCount = pj.value("ofa", 0u);
    p->memorySizeMB = pj.value("memoryMB", 0ull);
    std::string name = pj.value("name", "");
    std::strncpy(p->name, name.c_str(), sizeof p->name - 1);
    return NVML_SUCCESS;
  }
  return NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  FAKE_CHECK("nvmlEventSetCreate");
  *set = reinterpret_cast<nvmlEventSet_t>(new int(7));
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  delete reinterpret_cast<int*>(set);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t d, unsigned long long* types) {
  FAKE_CHECK("nvmlDeviceGetSupportedEventTypes");
  if (!Dev(d)) return NVML_ERROR_INVALID_ARGUMENT;
  *types = Dev(d)->spec.value("supportedEvents", 0xBull);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long, nvmlEventSet_t) {
  FAKE_CHECK("nvmlDeviceRegisterEvents");
  if (!Dev(d)) return NVML_ERROR_INVALID_ARGUMENT;
  return Dev(d)->spec.value("registerError", 0);
}

// Returns queued events in order, then times out at once: tests never wait.
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t, nvmlEventData_t* data, unsigned) {
  FAKE_CHECK("nvmlEventSetWait_v2");
  std::lock_guard<std::mutex> l(S().mu);
  if (S().events.empty()) return NVML_ERROR_TIMEOUT;
  json e = S().events.front();
  S().events.pop_front();
  if (e.contains("error")) return e["error"].get<int>();
  std::memset(data, 0, sizeof *data);
  unsigned idx = e.value("device", 0u);
  if (idx < S().devices.size()) data->device = reinterpret_cast<nvmlDevice_t>(S().devices[idx]);
  data->eventType = e.value("type", 8ull);
  data->eventData = e.value("xid", 0ull);
  data->gpuInstanceId = e.value("gi", 0xFFFFFFFFu);
  data->computeInstanceId = e.value("ci", 0xFFFFFFFFu);
  return NVML_SUCCESS;
}

}  // extern "C"
