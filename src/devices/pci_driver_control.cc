#include "devices/pci_driver_control.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "devices/pcie_root.h"
#include "util/failpoint.h"
#include "util/file_util.h"
#include "util/parse_number.h"

namespace nvdra::devices {

std::string LinkBaseName(const std::string& path) {
  char buf[PATH_MAX];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  std::string target(buf, static_cast<size_t>(n));
  while (!target.empty() && target.back() == '/') target.pop_back();
  auto slash = target.rfind('/');
  return slash == std::string::npos ? target : target.substr(slash + 1);
}

namespace {

std::string TrimmedFile(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return "";
  std::string s = *text;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

uint64_t NextPowerOfTwo(uint64_t n) {
  if (n == 0) return 0;
  uint64_t p = 1;
  while (p < n && p != (uint64_t{1} << 63)) p <<= 1;
  return p;
}

}  // namespace

uint64_t AddressableMemoryFromResource(const std::string& text) {
  uint64_t total = 0;
  size_t pos = 0;
  for (int line = 0; line < 6 && pos < text.size(); ++line) {
    size_t end = text.find('\n', pos);
    std::string l = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    pos = end == std::string::npos ? text.size() : end + 1;
    unsigned long long start = 0, last = 0, flags = 0;
    if (std::sscanf(l.c_str(), "%llx %llx %llx", &start, &last, &flags) != 3) continue;
    if (last == start) continue;
    if ((flags & 0x06) == 0x04) total += last - start + 1;
  }
  return NextPowerOfTwo(total);
}

SysfsPciDriverControl::SysfsPciDriverControl(std::string sysfs_root, SysfsWriteHook kernel)
    : sysfs_root_(std::move(sysfs_root)), kernel_(std::move(kernel)) {}

Result<PciDeviceState> SysfsPciDriverControl::Read(const std::string& bus_id) {
  if (bus_id.empty() || bus_id.find('/') != std::string::npos) {
    return InvalidArgument("invalid PCI bus id \"" + bus_id + "\"");
  }
  const std::string dir = JoinPath(sysfs_root_, "bus/pci/devices/" + bus_id);
  if (!PathExists(dir)) return NotFound("no PCI device " + bus_id + " in " + JoinPath(sysfs_root_, "bus/pci/devices"));
  PciDeviceState s;
  s.bus_id = bus_id;
  s.driver = LinkBaseName(JoinPath(dir, "driver"));
  std::string group = LinkBaseName(JoinPath(dir, "iommu_group"));
  if (!group.empty()) {
    Result<uint64_t> n = ParseUint64(group);
    if (!n.ok() || *n > 1'000'000) return Internal("unexpected iommu_group link \"" + group + "\" of " + bus_id);
    s.iommu_group = static_cast<int>(*n);
  }
  if (auto vfs = ReadFileToString(JoinPath(dir, "sriov_numvfs")); vfs.ok()) {
    std::string text = *vfs;
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    Result<uint64_t> n = ParseUint64(text);
    if (!n.ok() || *n > 100'000) return Internal("unexpected sriov_numvfs \"" + text + "\" of " + bus_id);
    s.num_vfs = static_cast<int>(*n);
  }
  s.vendor_id = TrimmedFile(JoinPath(dir, "vendor"));
  s.device_id = TrimmedFile(JoinPath(dir, "device"));
  s.class_code = TrimmedFile(JoinPath(dir, "class"));
  s.driver_override = TrimmedFile(JoinPath(dir, "driver_override"));
  if (s.driver_override == "(null)") s.driver_override.clear();
  s.pcie_root = PcieRootForBusId(sysfs_root_, bus_id);
  s.numa_node = NumaNodeForBusId(sysfs_root_, bus_id);
  if (auto res = ReadFileToString(JoinPath(dir, "resource")); res.ok()) {
    s.addressable_memory_bytes = AddressableMemoryFromResource(*res);
  }
  if (auto cdevs = ListDirectory(JoinPath(dir, "vfio-dev")); cdevs.ok() && !cdevs->empty()) {
    s.iommufd_cdev = cdevs->front();
  }
  return s;
}

Result<bool> SysfsPciDriverControl::IommuEnabled() {
  auto entries = ListDirectory(JoinPath(sysfs_root_, "kernel/iommu_groups"));
  if (!entries.ok()) {
    if (entries.status().code() == StatusCode::kNotFound) return false;
    return entries.status().Wrap("checking if IOMMU is enabled");
  }
  return !entries->empty();
}

Result<std::vector<std::string>> SysfsPciDriverControl::IommuGroupDevices(int group) {
  auto entries = ListDirectory(JoinPath(sysfs_root_, "kernel/iommu_groups/" + std::to_string(group) + "/devices"));
  if (!entries.ok()) return entries.status().Wrap("listing IOMMU group " + std::to_string(group));
  return *entries;
}

Result<std::vector<std::string>> SysfsPciDriverControl::ListDevices() {
  auto entries = ListDirectory(JoinPath(sysfs_root_, "bus/pci/devices"));
  if (!entries.ok()) return entries.status().Wrap("listing PCI devices");
  std::sort(entries->begin(), entries->end());
  return *entries;
}

Result<bool> SysfsPciDriverControl::ModuleLoaded(const std::string& module) {
  if (module.empty() || module.find('/') != std::string::npos || module[0] == '.') {
    return InvalidArgument("invalid kernel module name \"" + module + "\"");
  }
  struct stat st;
  return ::stat(JoinPath(sysfs_root_, "module/" + module).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool IsNvidiaGpu(const PciDeviceState& s) { return s.vendor_id == "0x10de" && s.class_code.rfind("0x03", 0) == 0; }

Status SysfsPciDriverControl::WriteSysfs(const std::string& path, const std::string& value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return Internal("opening " + path + ": " + ErrnoText(errno));
  ssize_t n = ::write(fd, value.data(), value.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    return Internal("writing \"" + value + "\" to " + path + ": " + ErrnoText(n < 0 ? err : EIO));
  }
  if (kernel_) return kernel_(path, value);
  return Status::Ok();
}

Status SysfsPciDriverControl::Unbind(const std::string& bus_id) {
  NVDRA_ASSIGN_OR_RETURN(PciDeviceState s, Read(bus_id));
  if (s.driver.empty()) return Status::Ok();
  return WriteSysfs(JoinPath(sysfs_root_, "bus/pci/devices/" + bus_id + "/driver/unbind"), bus_id)
      .Wrap("unbinding " + bus_id + " from " + s.driver);
}

Status SysfsPciDriverControl::Bind(const std::string& bus_id, const std::string& driver) {
  if (driver.empty() || driver.find('/') != std::string::npos) {
    return InvalidArgument("invalid driver name \"" + driver + "\"");
  }
  NVDRA_ASSIGN_OR_RETURN(PciDeviceState s, Read(bus_id));
  if (!s.driver.empty()) {
    return FailedPrecondition(bus_id + " is bound to " + s.driver + "; unbind it before binding it to " + driver);
  }
  const std::string dev = JoinPath(sysfs_root_, "bus/pci/devices/" + bus_id);
  NVDRA_RETURN_IF_ERROR(WriteSysfs(JoinPath(dev, "driver_override"), driver));
  NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT("pci-after-driver-override"));
  NVDRA_RETURN_IF_ERROR(WriteSysfs(JoinPath(sysfs_root_, "bus/pci/drivers/" + driver + "/bind"), bus_id)
                            .Wrap("binding " + bus_id + " to " + driver));
  if (driver == kNvidiaPciDriver) {
    NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT("pci-before-override-clear"));
    NVDRA_RETURN_IF_ERROR(ClearDriverOverride(bus_id));
  }
  NVDRA_ASSIGN_OR_RETURN(PciDeviceState after, Read(bus_id));
  if (after.driver != driver) {
    return Internal("after the bind, " + bus_id + " is bound to \"" + after.driver + "\", not " + driver);
  }
  return Status::Ok();
}

Status SysfsPciDriverControl::ClearDriverOverride(const std::string& bus_id) {
  if (bus_id.empty() || bus_id.find('/') != std::string::npos) {
    return InvalidArgument("invalid PCI bus id \"" + bus_id + "\"");
  }
  return WriteSysfs(JoinPath(sysfs_root_, "bus/pci/devices/" + bus_id + "/driver_override"), "\n");
}

Status ChangePciDriver(PciDriverControl& pci, const std::string& bus_id, const std::string& driver) {
  NVDRA_ASSIGN_OR_RETURN(PciDeviceState s, pci.Read(bus_id));
  if (s.driver == driver) {
    // Bind clears the override after a bind to nvidia; a crash between the
    // two leaves it set, and the repeated call finishes the job.
    if (driver == kNvidiaPciDriver && !s.driver_override.empty()) return pci.ClearDriverOverride(bus_id);
    return Status::Ok();
  }
  NVDRA_RETURN_IF_ERROR(pci.Unbind(bus_id));
  NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT("pci-after-unbind"));
  return pci.Bind(bus_id, driver);
}

}  // namespace nvdra::devices
