#include "devices/device_names.h"

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

bool SupportsMigModeToggle(const GpuInfo& gpu) {
  for (const char* older : {"Kepler", "Maxwell", "Pascal", "Volta", "Turing", "Ampere", "Ada Lovelace", "Ada"}) {
    if (gpu.architecture == older) return false;
  }
  return !gpu.architecture.empty();
}

bool DynamicMigCapable(const GpuInfo& gpu) {
  return !gpu.mig_profiles.empty() && (gpu.mig_enabled || SupportsMigModeToggle(gpu));
}

int MemorySliceCount(const GpuInfo& gpu) {
  int n = 0;
  for (const auto& p : gpu.mig_profiles) {
    for (const auto& pl : p.placements) n = std::max(n, pl.start + pl.size);
  }
  return n;
}

std::string ImexChannelDeviceName(int channel) { return "channel-" + std::to_string(channel); }

}  // namespace nvdra::devices
