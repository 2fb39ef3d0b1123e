#include "devices/published_devices.h"
#include "util/parse_number.h"

#include <algorithm>
#include <cctype>

namespace nvdra::devices {

std::string GpuDeviceName(int minor) { return "gpu-" + std::to_string(minor); }

std::string CanonicalMigProfile(const std::string& profile) {
  std::string out;
  for (char c : profile) {
    if (c == '.') continue;
    char l = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    bool ok = (l >= 'a' && l <= 'z') || (l >= '0' && l <= '9') || l == '-';
    out.push_back(ok ? l : '-');
  }
  size_t b = out.find_first_not_of('-');
  if (b == std::string::npos) return "";
  size_t e = out.find_last_not_of('-');
  return out.substr(b, e - b + 1);
}

std::string MigDeviceName(const MigDeviceInfo& mig) {
  return GpuDeviceName(mig.parent_minor) + "-mig-" + CanonicalMigProfile(mig.profile) + "-" +
         std::to_string(mig.gi_profile_id) + "-" + std::to_string(mig.placement_start);
}

std::string ImexChannelDeviceName(int channel) { return "channel-" + std::to_string(channel); }

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

void PutCommonGpuAttributes(model::PublishedDevice& d, const GpuInfo& g) {
  d.attributes["productName"] = g.product_name;
  d.attributes["brand"] = g.brand;
  d.attributes["architecture"] = g.architecture;
  PutVersion(d, "cudaComputeCapability", g.cuda_compute_capability);
  PutVersion(d, "driverVersion", g.driver_version);
  PutVersion(d, "cudaDriverVersion", g.cuda_driver_version);
  d.attributes["resource.kubernetes.io/pciBusID"] = g.pci_bus_id;
  if (g.pcie_root) d.attributes["resource.kubernetes.io/pcieRoot"] = *g.pcie_root;
  if (g.addressing_mode) d.attributes["addressingMode"] = *g.addressing_mode;
  d.sort_key = g.pci_bus_id;
}

model::PublishedDevice FullGpu(const GpuInfo& g) {
  model::PublishedDevice d;
  d.name = GpuDeviceName(g.minor);
  d.attributes["type"] = std::string("gpu");
  d.attributes["uuid"] = g.uuid;
  PutCommonGpuAttributes(d, g);
  if (g.memory_bytes) d.capacity["memory"] = std::to_string(*g.memory_bytes);
  return d;
}

model::PublishedDevice Mig(const GpuInfo& g, const MigDeviceInfo& m) {
  model::PublishedDevice d;
  d.name = MigDeviceName(m);
  d.attributes["type"] = std::string("mig");
  d.attributes["uuid"] = m.uuid;
  d.attributes["parentUUID"] = g.uuid;
  d.attributes["profile"] = m.profile;
  PutCommonGpuAttributes(d, g);
  d.capacity["multiprocessors"] = std::to_string(m.multiprocessors);
  d.capacity["copyEngines"] = std::to_string(m.copy_engines);
  d.capacity["decoders"] = std::to_string(m.decoders);
  d.capacity["encoders"] = std::to_string(m.encoders);
  d.capacity["jpegEngines"] = std::to_string(m.jpeg_engines);
  d.capacity["ofaEngines"] = std::to_string(m.ofa_engines);
  d.capacity["memory"] = std::to_string(m.memory_bytes);
  for (int i = m.placement_start; i < m.placement_start + m.placement_size; ++i) {
    d.capacity["memorySlice" + std::to_string(i)] = "1";
  }
  return d;
}

}  // namespace

std::vector<model::PublishedDevice> GpuPublishedDevices(const NodeInventory& inv) {
  std::vector<model::PublishedDevice> out;
  for (const auto& g : inv.gpus) {
    if (!g.mig_enabled) {
      out.push_back(FullGpu(g));
      continue;
    }
    for (const auto& m : g.migs) out.push_back(Mig(g, m));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::tie(a.sort_key, a.name) < std::tie(b.sort_key, b.name);
  });
  return out;
}

std::vector<model::PublishedDevice> ComputeDomainPublishedDevices(int channels) {
  std::vector<model::PublishedDevice> out;
  model::PublishedDevice daemon;
  daemon.name = kDaemonDeviceName;
  daemon.attributes["type"] = std::string("daemon");
  daemon.attributes["id"] = int64_t{0};
  out.push_back(daemon);
  channels = std::clamp(channels, 0, kMaxImexChannels);
  for (int i = 0; i < channels; ++i) {
    model::PublishedDevice c;
    c.name = ImexChannelDeviceName(i);
    c.attributes["type"] = std::string("channel");
    c.attributes["id"] = int64_t{i};
    out.push_back(c);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

}  // namespace nvdra::devices
