#include "devices/mock/mock_pci_sysfs.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "util/file_util.h"

namespace nvdra::devices {

namespace {

Status Symlink(const std::string& target, const std::string& link) {
  ::unlink(link.c_str());
  if (::symlink(target.c_str(), link.c_str()) != 0) return Internal("symlink " + link + ": " + ErrnoText(errno));
  return Status::Ok();
}

Status Touch(const std::string& path, mode_t mode) {
  if (PathExists(path)) return Status::Ok();
  return WriteFileAtomically(path, "", mode, false);
}

std::string Parent(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) return "";
  return buf;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// How the kernel refuses a write: the errno text a shell's echo would show.
Status Refused(const std::string& path, const std::string& value, int err) {
  return Internal("writing \"" + value + "\" to " + path + ": " + ErrnoText(err));
}

}  // namespace

std::string MockPciDeviceId(const GpuInfo& gpu) {
  const std::string& p = gpu.product_name;
  if (p.find("H100") != std::string::npos) return "0x2330";
  if (p.find("A100") != std::string::npos) return "0x20b2";
  if (p.find("GB200") != std::string::npos) return "0x2941";
  if (p.find("L40S") != std::string::npos) return "0x26b9";
  return "0x1db6";
}

std::string MockPciResource(const GpuInfo& gpu) {
  // BAR0: 16 MiB, 32-bit; BAR1: the memory size rounded up to a power of
  // two, 64-bit prefetchable; BAR3: 32 MiB, 64-bit prefetchable; the rest
  // unused, as lspci shows a data-centre GPU.
  uint64_t mem = gpu.memory_bytes.value_or(uint64_t{16} << 30);
  uint64_t bar1 = 1;
  while (bar1 < mem) bar1 <<= 1;
  auto line = [](uint64_t start, uint64_t size, uint64_t flags) {
    char buf[80];
    std::snprintf(buf, sizeof(buf), "0x%016llx 0x%016llx 0x%016llx\n", static_cast<unsigned long long>(start),
                  static_cast<unsigned long long>(size ? start + size - 1 : 0), static_cast<unsigned long long>(flags));
    return std::string(buf);
  };
  const uint64_t base = (uint64_t{0x20} << 40) + (static_cast<uint64_t>(gpu.minor) << 38);
  std::string s = line(0xa0000000ull + (static_cast<uint64_t>(gpu.minor) << 24), 16 << 20, 0x40200);
  s += line(base, bar1, 0x14220c);
  s += line(0, 0, 0);
  s += line(base + bar1, 32 << 20, 0x14220c);
  s += line(0, 0, 0) + line(0, 0, 0) + line(0, 0, 0);
  return s;
}

int MockIommuGroup(int gpu_minor) { return 40 + gpu_minor; }

Status MakeMockDeviceNode(const std::string& path, int major, int minor, mode_t mode) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) return Status::Ok();
  if (::geteuid() == 0 &&
      ::mknod(path.c_str(), S_IFCHR | mode, makedev(static_cast<unsigned>(major), static_cast<unsigned>(minor))) == 0) {
    ::chmod(path.c_str(), mode);
    return Status::Ok();
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, mode);
  if (fd < 0) return Internal("creating mock device node " + path + ": " + ErrnoText(errno));
  ::close(fd);
  return Status::Ok();
}

Status BuildMockPciSysfs(const std::string& root, const std::vector<GpuInfo>& gpus) {
  const std::string sys = JoinPath(root, "sys");
  for (const char* driver : {kNvidiaPciDriver, kVfioPciDriver}) {
    const std::string dir = JoinPath(sys, std::string("bus/pci/drivers/") + driver);
    NVDRA_RETURN_IF_ERROR(MakeDirectories(dir, 0755));
    for (const char* f : {"bind", "unbind", "new_id"}) NVDRA_RETURN_IF_ERROR(Touch(JoinPath(dir, f), 0200));
  }
  NVDRA_RETURN_IF_ERROR(MakeDirectories(JoinPath(sys, "bus/pci/devices"), 0755));
  // The vfio-pci module, loaded.
  NVDRA_RETURN_IF_ERROR(MakeDirectories(JoinPath(sys, "module/vfio_pci"), 0755));
  NVDRA_RETURN_IF_ERROR(MakeDirectories(JoinPath(root, "dev/vfio"), 0755));
  NVDRA_RETURN_IF_ERROR(MakeMockDeviceNode(JoinPath(root, "dev/vfio/vfio"), 10, 196, 0666));
  for (const auto& g : gpus) {
    const std::string rel = g.pcie_root.value_or("platform") + "/" + g.pci_bus_id;
    const std::string dir = JoinPath(sys, "devices/" + rel);
    const bool fresh = !PathExists(dir);
    NVDRA_RETURN_IF_ERROR(MakeDirectories(dir, 0755));
    NVDRA_RETURN_IF_ERROR(Symlink("../../../devices/" + rel, JoinPath(sys, "bus/pci/devices/" + g.pci_bus_id)));
    if (g.numa_node && g.pcie_root) {
      NVDRA_RETURN_IF_ERROR(WriteFileAtomically(JoinPath(dir, "numa_node"), std::to_string(*g.numa_node) + "\n", 0444,
                                                false));
    }
    const std::string group = std::to_string(MockIommuGroup(g.minor));
    const std::string group_dir = JoinPath(sys, "kernel/iommu_groups/" + group + "/devices");
    NVDRA_RETURN_IF_ERROR(MakeDirectories(group_dir, 0755));
    NVDRA_RETURN_IF_ERROR(Symlink("../../../../devices/" + rel, JoinPath(group_dir, g.pci_bus_id)));
    NVDRA_RETURN_IF_ERROR(Symlink("../../../kernel/iommu_groups/" + group, JoinPath(dir, "iommu_group")));
    NVDRA_RETURN_IF_ERROR(Touch(JoinPath(dir, "driver_override"), 0644));
    NVDRA_RETURN_IF_ERROR(WriteFileAtomically(JoinPath(dir, "vendor"), "0x10de\n", 0444, false));
    NVDRA_RETURN_IF_ERROR(WriteFileAtomically(JoinPath(dir, "device"), MockPciDeviceId(g) + "\n", 0444, false));
    NVDRA_RETURN_IF_ERROR(WriteFileAtomically(JoinPath(dir, "class"), "0x030200\n", 0444, false));
    NVDRA_RETURN_IF_ERROR(WriteFileAtomically(JoinPath(dir, "resource"), MockPciResource(g), 0444, false));
    if (fresh) {
      NVDRA_RETURN_IF_ERROR(Symlink(std::string("../../../bus/pci/drivers/") + kNvidiaPciDriver,
                                    JoinPath(dir, "driver")));
      NVDRA_RETURN_IF_ERROR(Symlink("../../../../devices/" + rel,
                                    JoinPath(sys,
                                             std::string("bus/pci/drivers/") + kNvidiaPciDriver + "/" + g.pci_bus_id)));
    }
  }
  return Status::Ok();
}

SysfsWriteHook MockPciKernel(const std::string& root) {
  return [root](const std::string& path, const std::string& raw) -> Status {
    const std::string sys = RealPath(JoinPath(root, "sys"));
    const std::string name = BaseName(path);
    if (name != "bind" && name != "unbind") return Status::Ok();  // driver_override, new_id: no reaction
    const std::string bdf = Trim(raw);
    const std::string driver_dir = RealPath(Parent(path));
    const std::string driver = BaseName(driver_dir);
    const std::string dev = RealPath(JoinPath(sys, "bus/pci/devices/" + bdf));
    if (bdf.empty() || dev.empty()) return Refused(path, raw, ENODEV);
    const std::string current = LinkBaseName(JoinPath(dev, "driver"));
    const std::string group = LinkBaseName(JoinPath(dev, "iommu_group"));
    const std::string group_node = JoinPath(root, "dev/vfio/" + group);
    if (name == "unbind") {
      if (current != driver) return Refused(path, raw, ENODEV);
      ::unlink(JoinPath(dev, "driver").c_str());
      ::unlink(JoinPath(driver_dir, bdf).c_str());
      if (driver == kVfioPciDriver && !group.empty()) ::unlink(group_node.c_str());
      return Status::Ok();
    }
    if (!current.empty()) return Refused(path, raw, EBUSY);
    auto override_text = ReadFileToString(JoinPath(dev, "driver_override"));
    std::string override_driver = override_text.ok() ? Trim(*override_text) : "";
    if (!override_driver.empty() && override_driver != driver) return Refused(path, raw, ENODEV);
    std::string rel_dev = dev.substr(sys.size() + 1);  // devices/<root>/<bdf>
    NVDRA_RETURN_IF_ERROR(Symlink("../../../bus/pci/drivers/" + driver, JoinPath(dev, "driver")));
    NVDRA_RETURN_IF_ERROR(Symlink("../../../../" + rel_dev, JoinPath(driver_dir, bdf)));
    if (driver == kVfioPciDriver && !group.empty()) {
      NVDRA_RETURN_IF_ERROR(MakeMockDeviceNode(group_node, kMockVfioMajor, std::stoi(group), 0666));
    }
    return Status::Ok();
  };
}

}  // namespace nvdra::devices
