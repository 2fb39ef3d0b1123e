#include "devices/inventory_json.h"

#include <nlohmann/json.hpp>

namespace nvdra::devices {

namespace {

using ordered_json = nlohmann::ordered_json;

ordered_json MigJson(const MigDeviceInfo& m) {
  ordered_json j;
  j["uuid"] = m.uuid;
  j["profile"] = m.profile;
  j["giProfileId"] = m.gi_profile_id;
  j["ciProfileId"] = m.ci_profile_id;
  j["giId"] = m.gi_id;
  j["ciId"] = m.ci_id;
  j["placementStart"] = m.placement_start;
  j["placementSize"] = m.placement_size;
  j["multiprocessors"] = m.multiprocessors;
  j["copyEngines"] = m.copy_engines;
  j["decoders"] = m.decoders;
  j["encoders"] = m.encoders;
  j["jpegEngines"] = m.jpeg_engines;
  j["ofaEngines"] = m.ofa_engines;
  j["memoryBytes"] = m.memory_bytes;
  return j;
}

ordered_json GpuJson(const GpuInfo& g) {
  ordered_json j;
  j["minor"] = g.minor;
  j["uuid"] = g.uuid;
  j["productName"] = g.product_name;
  j["brand"] = g.brand;
  j["architecture"] = g.architecture;
  j["cudaComputeCapability"] = g.cuda_compute_capability;
  j["driverVersion"] = g.driver_version;
  j["cudaDriverVersion"] = g.cuda_driver_version;
  j["pciBusId"] = g.pci_bus_id;
  if (g.pcie_root) j["pcieRoot"] = *g.pcie_root;
  if (g.numa_node) j["numaNode"] = *g.numa_node;
  if (g.memory_bytes) j["memoryBytes"] = *g.memory_bytes;
  if (g.addressing_mode) j["addressingMode"] = *g.addressing_mode;
  if (g.module_id) j["moduleId"] = *g.module_id;
  j["migEnabled"] = g.mig_enabled;
  if (!g.migs.empty()) {
    ordered_json migs = ordered_json::array();
    for (const auto& m : g.migs) migs.push_back(MigJson(m));
    j["migDevices"] = std::move(migs);
  }
  if (!g.clique_id.empty()) j["cliqueId"] = g.clique_id;
  return j;
}

ordered_json DevicesJson(const std::vector<model::PublishedDevice>& devices) {
  ordered_json arr = ordered_json::array();
  for (const auto& d : devices) {
    ordered_json j;
    j["name"] = d.name;
    ordered_json attrs = ordered_json::object();
    for (const auto& [k, v] : d.attributes) {
      ordered_json a;
      if (auto* s = std::get_if<std::string>(&v)) a["string"] = *s;
      if (auto* i = std::get_if<int64_t>(&v)) a["int"] = *i;
      if (auto* b = std::get_if<bool>(&v)) a["bool"] = *b;
      if (auto* ver = std::get_if<model::Version>(&v)) a["version"] = ver->value;
      if (auto* l = std::get_if<model::IntList>(&v)) a["ints"] = l->values;
      attrs[k] = std::move(a);
    }
    j["attributes"] = std::move(attrs);
    if (!d.capacity.empty()) {
      ordered_json cap = ordered_json::object();
      for (const auto& [k, v] : d.capacity) cap[k] = ordered_json{{"value", v}};
      j["capacity"] = std::move(cap);
    }
    arr.push_back(std::move(j));
  }
  return arr;
}

}  // namespace

std::string RenderDiscoveryJson(const NodeInventory& inventory, const std::vector<model::PublishedDevice>& gpu_devices,
                                const std::vector<model::PublishedDevice>& compute_domain_devices) {
  ordered_json inv;
  inv["driverVersion"] = inventory.driver_version;
  inv["cudaDriverVersion"] = inventory.cuda_driver_version;
  inv["cliqueId"] = inventory.clique_id;
  ordered_json gpus = ordered_json::array();
  for (const auto& g : inventory.gpus) gpus.push_back(GpuJson(g));
  inv["gpus"] = std::move(gpus);
  ordered_json out;
  out["inventory"] = std::move(inv);
  out["gpuDevices"] = DevicesJson(gpu_devices);
  out["computeDomainDevices"] = DevicesJson(compute_domain_devices);
  return out.dump(2) + "\n";
}

std::string RenderPublishedDevicesJson(const std::vector<model::PublishedDevice>& devices) {
  return DevicesJson(devices).dump(2) + "\n";
}

}  // namespace nvdra::devices
