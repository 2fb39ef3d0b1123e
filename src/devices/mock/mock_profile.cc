#include "devices/mock/mock_profile.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "util/file_util.h"

namespace nvdra::devices {

namespace {

using nlohmann::json;

uint64_t Fnv1a64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

// A stable, UUID-shaped id derived from `seed`, so golden files do not move.
std::string DeterministicUuid(const std::string& seed) {
  uint64_t a = Fnv1a64(seed), b = Fnv1a64(seed + "#");
  char out[40];
  std::snprintf(out, sizeof out, "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xffff),
                static_cast<unsigned>(b >> 48), static_cast<unsigned long long>(b & 0xffffffffffffULL));
  return out;
}

template <typename T>
Status Get(const json& j, const char* key, T& out, bool required, const std::string& where) {
  if (!j.contains(key)) {
    if (required) return InvalidArgument(where + ": missing \"" + key + "\"");
    return Status::Ok();
  }
  try {
    out = j.at(key).get<T>();
  } catch (const json::exception& e) {
    return InvalidArgument(where + ": \"" + key + "\" has the wrong type: " + e.what());
  }
  return Status::Ok();
}

Status CheckKeys(const json& j, std::initializer_list<const char*> known, const std::string& where) {
  if (!j.is_object()) return InvalidArgument(where + ": not an object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (const char* k : known) ok = ok || it.key() == k;
    if (!ok) return InvalidArgument(where + ": unknown field \"" + it.key() + "\"");
  }
  return Status::Ok();
}

Result<MigDeviceInfo> ParseMig(const json& j, const std::string& where) {
  NVDRA_RETURN_IF_ERROR(CheckKeys(j,
                                  {"profile", "giProfileId", "ciProfileId", "giId", "ciId", "placementStart",
                                   "placementSize", "multiprocessors", "copyEngines", "decoders", "encoders",
                                   "jpegEngines", "ofaEngines", "memoryBytes", "uuid"},
                                  where));
  MigDeviceInfo m;
  NVDRA_RETURN_IF_ERROR(Get(j, "profile", m.profile, true, where));
  NVDRA_RETURN_IF_ERROR(Get(j, "giProfileId", m.gi_profile_id, true, where));
  NVDRA_RETURN_IF_ERROR(Get(j, "ciProfileId", m.ci_profile_id, false, where));
  NVDRA_RETURN_IF_ERROR(Get(j, "giId", m.gi_id, true, where));
  NVDRA_RETURN_IF_ERROR(Get(j, "ciId", m.ci_id, false, where));
  NVDRA_RETURN_IF_ERROR(Get(j, "placementStart", m.placement_start, true, where));
  NVDRA_RETURN_IF_ERROR(Get(j, "placementSize", m.placement_size, true, where));
  NVDRA_RETURN_IF_ERROR(Get(j, "multiprocessors", m.multiprocessors, false, where));
  NVDRA_RETURN_IF_ERROR(Get(j, "copyEngines", m.copy_engines, false, where));
  NVDRA_RETURN_IF_ERROR(Get(j, "decoders", m.decoders, false, where));
  NVDRA_RETURN_IF_ERROR(Get(j, "encoders", m.encoders, false, where));
  NVDRA_RETURN_IF_ERROR(Get(j, "jpegEngines", m.jpeg_engines, false, where));
  NVDRA_RETURN_IF_ERROR(Get(j, "ofaEngines", m.ofa_engines, false, where));
  NVDRA_RETURN_IF_ERROR(Get(j, "memoryBytes", m.memory_bytes, false, where));
  NVDRA_RETURN_IF_ERROR(Get(j, "uuid", m.uuid, false, where));
  if (m.placement_size <= 0 || m.placement_start < 0 || m.gi_id < 0 || m.ci_id < 0) {
    return InvalidArgument(where + ": placement and instance ids must be non-negative, size positive");
  }
  return m;
}

// One entry of "gpus": `count` GPUs alike but for their minor, UUID, PCI
// bus id and root.
struct GpuGroup {
  int count = 1;
  GpuInfo base;
  std::vector<std::string> buses, roots, uuids;
  std::vector<int> numa_nodes, module_ids;
  std::vector<MigDeviceInfo> migs;
};

Status ParseClique(const json& j, const std::string& where, NodeInventory& inv) {
  if (!j.contains("clique")) return Status::Ok();
  const json& c = j["clique"];
  NVDRA_RETURN_IF_ERROR(CheckKeys(c, {"clusterUUID", "cliqueId"}, where + " clique"));
  std::string cluster;
  unsigned clique = 0;
  NVDRA_RETURN_IF_ERROR(Get(c, "clusterUUID", cluster, true, where + " clique"));
  NVDRA_RETURN_IF_ERROR(Get(c, "cliqueId", clique, true, where + " clique"));
  inv.clique_id = cluster + "." + std::to_string(clique);
  return Status::Ok();
}

Status ParseGpuAttributes(const json& gj, const std::string& gwhere, GpuInfo& base) {
  NVDRA_RETURN_IF_ERROR(Get(gj, "productName", base.product_name, true, gwhere));
  NVDRA_RETURN_IF_ERROR(Get(gj, "brand", base.brand, true, gwhere));
  NVDRA_RETURN_IF_ERROR(Get(gj, "architecture", base.architecture, true, gwhere));
  NVDRA_RETURN_IF_ERROR(Get(gj, "cudaComputeCapability", base.cuda_compute_capability, true, gwhere));
  if (gj.contains("memoryBytes")) {
    uint64_t mem = 0;
    NVDRA_RETURN_IF_ERROR(Get(gj, "memoryBytes", mem, true, gwhere));
    base.memory_bytes = mem;
  }
  if (gj.contains("addressingMode")) {
    std::string mode;
    NVDRA_RETURN_IF_ERROR(Get(gj, "addressingMode", mode, true, gwhere));
    base.addressing_mode = mode;
  }
  return Get(gj, "migEnabled", base.mig_enabled, false, gwhere);
}

Result<GpuGroup> ParseGpuGroup(const json& gj, const std::string& gwhere, const NodeInventory& inv) {
  NVDRA_RETURN_IF_ERROR(CheckKeys(gj,
                                  {"count", "productName", "brand", "architecture", "cudaComputeCapability",
                                   "memoryBytes", "addressingMode", "pciBusIds", "pcieRoots", "numaNodes", "uuids",
                                   "migEnabled", "migDevices", "migProfiles", "moduleIds"},
                                  gwhere));
  GpuGroup g;
  NVDRA_RETURN_IF_ERROR(Get(gj, "count", g.count, false, gwhere));
  if (g.count < 1 || g.count > 64) return InvalidArgument(gwhere + ": count must be 1..64");
  g.base.driver_version = inv.driver_version;
  g.base.cuda_driver_version = inv.cuda_driver_version;
  g.base.clique_id = inv.clique_id;
  NVDRA_RETURN_IF_ERROR(ParseGpuAttributes(gj, gwhere, g.base));
  NVDRA_RETURN_IF_ERROR(Get(gj, "pciBusIds", g.buses, false, gwhere));
  NVDRA_RETURN_IF_ERROR(Get(gj, "pcieRoots", g.roots, false, gwhere));
  NVDRA_RETURN_IF_ERROR(Get(gj, "uuids", g.uuids, false, gwhere));
  NVDRA_RETURN_IF_ERROR(Get(gj, "numaNodes", g.numa_nodes, false, gwhere));
  NVDRA_RETURN_IF_ERROR(Get(gj, "moduleIds", g.module_ids, false, gwhere));
  if (!g.module_ids.empty() && static_cast<int>(g.module_ids.size()) != g.count) {
    return InvalidArgument(gwhere + ": moduleIds need one entry per GPU (count " + std::to_string(g.count) + ")");
  }
  for (int m : g.module_ids) {
    if (m <= 0) return InvalidArgument(gwhere + ": module ids must be positive (0 is no module id)");
  }
  for (auto* list : {&g.buses, &g.roots, &g.uuids}) {
    if (!list->empty() && static_cast<int>(list->size()) != g.count) {
      return InvalidArgument(gwhere + ": pciBusIds, pcieRoots, numaNodes and uuids need one entry per GPU (count " +
                             std::to_string(g.count) + ")");
    }
  }
  if (!g.numa_nodes.empty() && static_cast<int>(g.numa_nodes.size()) != g.count) {
    return InvalidArgument(gwhere + ": pciBusIds, pcieRoots, numaNodes and uuids need one entry per GPU (count " +
                           std::to_string(g.count) + ")");
  }
  if (!g.numa_nodes.empty() && g.roots.empty()) {
    return InvalidArgument(gwhere + ": numaNodes need pcieRoots (the fake sysfs entry they are written in)");
  }
  if (gj.contains("migProfiles")) {
    std::string model;
    NVDRA_RETURN_IF_ERROR(Get(gj, "migProfiles", model, true, gwhere));
    auto profiles = BuiltinMigProfiles(model);
    if (!profiles.ok()) return profiles.status().Wrap(gwhere);
    g.base.mig_profiles = std::move(profiles).value();
  }
  if (gj.contains("migDevices")) {
    if (!g.base.mig_enabled) return InvalidArgument(gwhere + ": migDevices need \"migEnabled\": true");
    for (size_t mi = 0; mi < gj["migDevices"].size(); ++mi) {
      NVDRA_ASSIGN_OR_RETURN(auto m,
                             ParseMig(gj["migDevices"][mi], gwhere + " migDevices[" + std::to_string(mi) + "]"));
      g.migs.push_back(std::move(m));
    }
  }
  return g;
}

// The group's GPUs, numbered from `minor` on; UUIDs the profile leaves out
// derive from the profile's name, so they do not depend on the directory.
void AddGpus(const GpuGroup& group, const std::string& name, int& minor, NodeInventory& inv) {
  for (int k = 0; k < group.count; ++k, ++minor) {
    GpuInfo g = group.base;
    g.minor = minor;
    g.uuid = group.uuids.empty() ? "GPU-" + DeterministicUuid(name + "/gpu/" + std::to_string(minor)) : group.uuids[k];
    char bus[32];
    std::snprintf(bus, sizeof bus, "0000:%02x:00.0", 0x10 * (minor + 1) % 0x100);
    g.pci_bus_id = group.buses.empty() ? std::string(bus) : group.buses[k];
    if (!group.roots.empty()) g.pcie_root = group.roots[k];
    if (!group.numa_nodes.empty() && group.numa_nodes[k] >= 0) g.numa_node = group.numa_nodes[k];
    if (!group.module_ids.empty()) g.module_id = group.module_ids[k];
    for (const auto& mt : group.migs) {
      MigDeviceInfo m = mt;
      m.parent_minor = minor;
      m.parent_uuid = g.uuid;
      if (m.uuid.empty()) {
        m.uuid = "MIG-" + DeterministicUuid(name + "/mig/" + std::to_string(minor) + "/" + std::to_string(m.gi_id) +
                                            "/" + std::to_string(m.ci_id));
      }
      g.migs.push_back(std::move(m));
    }
    inv.gpus.push_back(std::move(g));
  }
}

Status CheckDistinctGpus(const NodeInventory& inv, const std::string& where) {
  for (size_t a = 0; a < inv.gpus.size(); ++a) {
    for (size_t b = 0; b < a; ++b) {
      const GpuInfo &x = inv.gpus[a], &y = inv.gpus[b];
      if (x.pci_bus_id == y.pci_bus_id || x.uuid == y.uuid || (x.module_id && x.module_id == y.module_id)) {
        return InvalidArgument(where + ": GPUs " + std::to_string(b) + " and " + std::to_string(a) +
                               " share a PCI bus id, UUID or module id");
      }
    }
  }
  return Status::Ok();
}

// "fabricPartitions": [{"id": 0, "moduleIds": [1, 2]}, ...], each module id
// one of the profile's GPUs.
Status ParseFabricPartitions(const json& j, const std::string& where, MockProfile& p) {
  if (!j.contains("fabricPartitions")) return Status::Ok();
  if (!j["fabricPartitions"].is_array()) return InvalidArgument(where + ": \"fabricPartitions\" must be a list");
  for (size_t i = 0; i < j["fabricPartitions"].size(); ++i) {
    const json& pj = j["fabricPartitions"][i];
    const std::string pwhere = where + " fabricPartitions[" + std::to_string(i) + "]";
    NVDRA_RETURN_IF_ERROR(CheckKeys(pj, {"id", "moduleIds"}, pwhere));
    FabricPartition part;
    std::vector<int> modules;
    NVDRA_RETURN_IF_ERROR(Get(pj, "id", part.id, true, pwhere));
    NVDRA_RETURN_IF_ERROR(Get(pj, "moduleIds", modules, true, pwhere));
    for (int m : modules) {
      const GpuInfo* gpu = nullptr;
      for (const auto& g : p.inventory.gpus) gpu = g.module_id == m ? &g : gpu;
      if (gpu == nullptr) return InvalidArgument(pwhere + ": no GPU has module id " + std::to_string(m));
      part.gpus.push_back({m, gpu->uuid, gpu->pci_bus_id});
    }
    p.fabric_partitions.push_back(std::move(part));
  }
  return ValidateFabricPartitions(p.fabric_partitions).Wrap(where);
}

}  // namespace

Result<MockProfile> ParseMockProfile(const std::string& json_text, const std::string& name) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    return InvalidArgument("mock hardware profile " + name + " is not valid JSON: " + e.what());
  }
  const std::string where = "mock hardware profile " + name;
  NVDRA_RETURN_IF_ERROR(CheckKeys(
      j, {"driverVersion", "cudaDriverVersion", "clique", "imexChannels", "gpus", "fabricPartitions"}, where));
  MockProfile p;
  p.name = name;
  NodeInventory& inv = p.inventory;
  NVDRA_RETURN_IF_ERROR(Get(j, "driverVersion", inv.driver_version, true, where));
  NVDRA_RETURN_IF_ERROR(Get(j, "cudaDriverVersion", inv.cuda_driver_version, true, where));
  NVDRA_RETURN_IF_ERROR(Get(j, "imexChannels", p.imex_channels, false, where));
  if (p.imex_channels < 0 || p.imex_channels > 2048) {
    return InvalidArgument(where + ": imexChannels must be 0..2048");
  }
  NVDRA_RETURN_IF_ERROR(ParseClique(j, where, inv));
  if (!j.contains("gpus") || !j["gpus"].is_array()) return InvalidArgument(where + ": \"gpus\" must be a list");
  int minor = 0;
  for (size_t gi = 0; gi < j["gpus"].size(); ++gi) {
    NVDRA_ASSIGN_OR_RETURN(GpuGroup group,
                           ParseGpuGroup(j["gpus"][gi], where + " gpus[" + std::to_string(gi) + "]", inv));
    AddGpus(group, name, minor, inv);
  }
  NVDRA_RETURN_IF_ERROR(CheckDistinctGpus(inv, where));
  NVDRA_RETURN_IF_ERROR(ParseFabricPartitions(j, where, p));
  return p;
}

Result<MockProfile> LoadMockProfile(const std::string& name_or_path) {
  auto builtin = BuiltinMockProfileJson(name_or_path);
  if (builtin.ok()) return ParseMockProfile(*builtin, name_or_path);
  if (name_or_path.find('/') == std::string::npos && !PathExists(name_or_path)) return builtin.status();
  auto text = ReadFileToString(name_or_path);
  if (!text.ok()) return text.status().Wrap("reading mock hardware profile");
  // The base name seeds the generated UUIDs, so they do not depend on where
  // the file lives.
  auto slash = name_or_path.find_last_of('/');
  return ParseMockProfile(*text, slash == std::string::npos ? name_or_path : name_or_path.substr(slash + 1));
}

}  // namespace nvdra::devices
