#include "devices/device_health.h"

#include <sstream>

#include "devices/device_names.h"
#include "util/parse_number.h"

namespace nvdra::devices {

const char* HealthStateName(HealthState s) {
  switch (s) {
    case HealthState::kHealthy: return "Healthy";
    case HealthState::kUnhealthy: return "Unhealthy";
    case HealthState::kUnmonitored: return "Unmonitored";
    case HealthState::kNotice: return "Notice";
  }
  return "Unknown";
}

XidPolicy::XidPolicy() : ignored_{13, 31, 43, 45, 68, 109} {}

Result<XidPolicy> XidPolicy::WithAdditional(const std::string& comma_list) {
  XidPolicy p;
  std::stringstream in(comma_list);
  std::string item;
  while (std::getline(in, item, ',')) {
    auto b = item.find_first_not_of(" \t");
    if (b == std::string::npos) continue;
    item = item.substr(b, item.find_last_not_of(" \t") - b + 1);
    // Digits only: ParseUint64 alone would take a leading '+'.
    bool ok = !item.empty() && item.size() < 10;
    for (char c : item) ok = ok && c >= '0' && c <= '9';
    Result<uint64_t> v = ParseUint64(item);
    if (!ok || !v.ok()) {
      return InvalidArgument("--additional-xids-to-ignore: \"" + item +
                             "\" is not a decimal XID (want e.g. \"74,79\")");
    }
    p.ignored_.insert(*v);
  }
  return p;
}

std::vector<std::string> AffectedDevices(const GpuInfo& gpu, std::optional<int> gi, std::optional<int> ci) {
  if (!gpu.mig_enabled) return {GpuDeviceName(gpu.minor)};
  std::vector<std::string> out;
  for (const auto& m : gpu.migs) {
    if (gi && m.gi_id != *gi) continue;
    if (gi && ci && m.ci_id != *ci) continue;
    out.push_back(MigDeviceName(m));
  }
  return out;
}

}  // namespace nvdra::devices
