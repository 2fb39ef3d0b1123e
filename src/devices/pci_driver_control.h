// The kernel driver a PCI device is bound to, read and changed through sysfs
// as upstream's passthrough support does: the `driver` link of
// <sysfs>/bus/pci/devices/<bdf>, its `iommu_group` link into
// <sysfs>/kernel/iommu_groups/<n>/devices, `sriov_numvfs`, and the
// `driver_override`, `driver/unbind` and `drivers/<name>/bind` files.
//
// Plain files cannot react to writes, so a fake sysfs (the mock root) passes
// a SysfsWriteHook that does what the kernel would after each write (moves
// the `driver` link, creates /dev/vfio/<group>); on real hardware there is
// none. Either way the writes below are the ones made.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "util/status.h"

namespace nvdra::devices {

inline constexpr const char* kNvidiaPciDriver = "nvidia";
inline constexpr const char* kVfioPciDriver = "vfio-pci";

// What sysfs says about one PCI device.
struct PciDeviceState {
  std::string bus_id;
  // The name the `driver` link points at; empty when no driver is bound.
  std::string driver;
  // From the `iommu_group` link; nullopt without one (IOMMU off).
  std::optional<int> iommu_group;
  // sriov_numvfs; 0 when the file is absent (no SR-IOV).
  int num_vfs = 0;
  // The `vendor` and `device` files ("0x10de", "0x2330"); empty when absent.
  std::string vendor_id, device_id;
  // The `class` file ("0x030200", a 3D controller); empty when absent.
  std::string class_code;
  // As for a GPU NVML sees (pcie_root.h).
  std::optional<std::string> pcie_root;
  std::optional<int> numa_node;
  // As upstream (go-nvlib's GetTotalAddressableMemory(true)): the sizes of
  // the 64-bit memory BARs among the first six regions of the `resource`
  // file, summed and rounded up to a power of two; 0 without the file.
  uint64_t addressable_memory_bytes = 0;
  // The iommufd character device, the entry of vfio-dev/ ("vfio3"); empty
  // when there is none (not on vfio-pci, or no iommufd).
  std::string iommufd_cdev;
  // The `driver_override` file; empty when unset (the kernel shows "(null)").
  std::string driver_override;
};

// Called after a write of `value` to the sysfs file `path` succeeded.
using SysfsWriteHook = std::function<Status(const std::string& path, const std::string& value)>;

class PciDriverControl {
 public:
  virtual ~PciDriverControl() = default;
  // NotFound when sysfs has no such device.
  virtual Result<PciDeviceState> Read(const std::string& bus_id) = 0;
  // True when <sysfs>/kernel/iommu_groups has an entry (upstream's test).
  virtual Result<bool> IommuEnabled() = 0;
  // The bus ids in an IOMMU group, sorted.
  virtual Result<std::vector<std::string>> IommuGroupDevices(int group) = 0;
  // Every PCI device's bus id, sorted.
  virtual Result<std::vector<std::string>> ListDevices() = 0;
  // Whether <sysfs>/module/<module> is a directory (the module is loaded).
  virtual Result<bool> ModuleLoaded(const std::string& module) = 0;
  // Unbinds the device from its driver; a device with none is left alone.
  virtual Status Unbind(const std::string& bus_id) = 0;
  // Sets driver_override to `driver` and binds the device to it; the
  // override is cleared again after a bind to nvidia, so that the device is
  // what the kernel would pick on its own.
  virtual Status Bind(const std::string& bus_id, const std::string& driver) = 0;
  // Clears driver_override, as Bind does after a bind to nvidia.
  virtual Status ClearDriverOverride(const std::string& bus_id) = 0;
};

class SysfsPciDriverControl final : public PciDriverControl {
 public:
  explicit SysfsPciDriverControl(std::string sysfs_root, SysfsWriteHook kernel = nullptr);
  Result<PciDeviceState> Read(const std::string& bus_id) override;
  Result<bool> IommuEnabled() override;
  Result<std::vector<std::string>> IommuGroupDevices(int group) override;
  Result<std::vector<std::string>> ListDevices() override;
  Result<bool> ModuleLoaded(const std::string& module) override;
  Status Unbind(const std::string& bus_id) override;
  Status Bind(const std::string& bus_id, const std::string& driver) override;
  Status ClearDriverOverride(const std::string& bus_id) override;

 private:
  // Writes to an existing sysfs file (never creates one), then runs the hook.
  Status WriteSysfs(const std::string& path, const std::string& value);
  std::string sysfs_root_;
  SysfsWriteHook kernel_;
};

// Unbinds the device from whatever driver it has and binds it to `driver`;
// nothing is written when it is already bound to `driver`, except that a
// driver_override left behind by a bind to nvidia cut short is cleared.
// Every step can be cut short and the call repeated: a device on no driver
// is bound, one on `driver` is left there. Failpoint `pci-after-unbind`
// sits between the unbind and the bind.
Status ChangePciDriver(PciDriverControl& pci, const std::string& bus_id, const std::string& driver);

// An NVIDIA display controller (vendor 0x10de, class 0x03xxxx): a GPU.
bool IsNvidiaGpu(const PciDeviceState& s);

// Parses a sysfs `resource` file as above.
uint64_t AddressableMemoryFromResource(const std::string& text);

// The last component of a link's target ("../../bus/pci/drivers/nvidia" ->
// "nvidia"); empty when `path` is not a link.
std::string LinkBaseName(const std::string& path);

}  // namespace nvdra::devices
