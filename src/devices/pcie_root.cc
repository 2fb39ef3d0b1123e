#include "devices/pcie_root.h"

#include <climits>
#include <cstdlib>

#include "util/file_util.h"

namespace nvdra::devices {

std::optional<std::string> PcieRootForBusId(const std::string& sysfs_root, const std::string& bus_id) {
  std::string link = JoinPath(sysfs_root, "bus/pci/devices/" + bus_id);
  char resolved[PATH_MAX];
  if (::realpath(link.c_str(), resolved) == nullptr) return std::nullopt;
  std::string target = resolved;
  // .../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0
  const std::string marker = "/devices/pci";
  auto pos = target.find(marker);
  if (pos == std::string::npos) return std::nullopt;
  std::string rest = target.substr(pos + std::string("/devices/").size());
  auto slash = rest.find('/');
  std::string root = rest.substr(0, slash);
  if (root.size() < 4) return std::nullopt;
  return root;
}

std::optional<int> NumaNodeForBusId(const std::string& sysfs_root, const std::string& bus_id) {
  auto text = ReadFileToString(JoinPath(sysfs_root, "bus/pci/devices/" + bus_id + "/numa_node"));
  if (!text.ok()) return std::nullopt;
  const std::string& s = *text;
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  bool negative = i < s.size() && s[i] == '-';
  if (negative) ++i;
  size_t digits = i;
  long value = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9' && value < 1'000'000) value = value * 10 + (s[i++] - '0');
  if (i == digits || value >= 1'000'000) return std::nullopt;
  while (i < s.size() && (s[i] == '\n' || s[i] == ' ' || s[i] == '\t')) ++i;
  if (i != s.size() || negative) return std::nullopt;
  return static_cast<int>(value);
}

}  // namespace nvdra::devices
