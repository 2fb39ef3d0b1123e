#include "gpu/gpu_published_devices.h"

#include <algorithm>
#include <cctype>

#include "gpu/gpu_handlers.h"
#include "util/parse_number.h"

namespace nvdra::gpu {

Result<std::string> NormalizeVersion(const std::string& v) {
  std::string s = v;
  if (!s.empty() && (s[0] == 'v' || s[0] == 'V')) s = s.substr(1);
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    parts.push_back(s.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (parts.empty() || parts.size() > 3) return InvalidArgument("version \"" + v + "\" is not N[.N[.N]]");
  std::string out;
  for (size_t i = 0; i < 3; ++i) {
    std::string p = i < parts.size() ? parts[i] : "0";
    Result<uint64_t> n = ParseUint64(p);
    if (p.empty() || p.size() > 18 || !std::all_of(p.begin(), p.end(), ::isdigit) || !n.ok()) {
      return InvalidArgument("version \"" + v + "\" is not N[.N[.N]]");
    }
    if (i) out += ".";
    out += std::to_string(*n);
  }
  return out;
}

namespace {

void PutVersion(model::PublishedDevice& d, const std::string& key, const std::string& v) {
  auto n = NormalizeVersion(v);
  // An unparsable version is left out rather than published wrong; upstream
  // panics here.
  if (n.ok()) d.attributes[key] = model::Version{*n};
}

}  // namespace

void PutCommonGpuAttributes(model::PublishedDevice& d, const devices::GpuInfo& g) {
  d.attributes["productName"] = g.product_name;
  d.attributes["brand"] = g.brand;
  d.attributes["architecture"] = g.architecture;
  PutVersion(d, "cudaComputeCapability", g.cuda_compute_capability);
  PutVersion(d, "driverVersion", g.driver_version);
  PutVersion(d, "cudaDriverVersion", g.cuda_driver_version);
  d.attributes["resource.kubernetes.io/pciBusID"] = g.pci_bus_id;
  if (g.pcie_root) d.attributes["resource.kubernetes.io/pcieRoot"] = *g.pcie_root;
  if (g.numa_node) d.attributes[std::string(kNumaNodeAttribute)] = static_cast<int64_t>(*g.numa_node);
  if (g.addressing_mode) d.attributes["addressingMode"] = *g.addressing_mode;
  d.sort_key = g.pci_bus_id;
}

void ApplyListTypeAttributes(model::PublishedDevice& d, const config::FeatureGates& gates) {
  if (!gates.Enabled(config::Gate::kDRAListTypeAttributes)) return;
  auto it = d.attributes.find(std::string(kNumaNodeAttribute));
  if (it == d.attributes.end()) return;
  if (const auto* n = std::get_if<int64_t>(&it->second)) it->second = model::IntList{{*n}};
}

std::vector<model::PublishedDevice> GpuPublishedDevices(const devices::NodeInventory& inv,
                                                        const config::FeatureGates& gates) {
  std::vector<model::PublishedDevice> out;
  for (const auto& type : RegisteredDeviceTypes(gates)) {
    for (const auto& device : type->Devices(inv)) {
      out.push_back(type->Publish(device));
      ApplyListTypeAttributes(out.back(), gates);
    }
  }
  SortByBusId(out);
  return out;
}

void SortByBusId(std::vector<model::PublishedDevice>& devices) {
  std::sort(devices.begin(), devices.end(),
            [](const auto& a, const auto& b) { return std::tie(a.sort_key, a.name) < std::tie(b.sort_key, b.name); });
}

}  // namespace nvdra::gpu
