// The mock's fake PCI sysfs and the "kernel" that answers writes to it.
//
// Under the mock root, for every GPU (bdf = its PCI bus id, <root> its
// pcieRoot, or "platform" without one):
//   sys/devices/<root>/<bdf>/{numa_node,driver_override,vendor,device,class,resource}
//   sys/devices/<root>/<bdf>/driver      -> ../../../bus/pci/drivers/nvidia
//   sys/devices/<root>/<bdf>/iommu_group -> ../../../kernel/iommu_groups/<g>
//   sys/bus/pci/devices/<bdf>            -> ../../../devices/<root>/<bdf>
//   sys/bus/pci/drivers/{nvidia,vfio-pci}/{bind,unbind,new_id}, /<bdf> links
//   sys/kernel/iommu_groups/<g>/devices/<bdf>
//   sys/module/vfio_pci (the module is loaded)
//   dev/vfio/vfio, and dev/vfio/<g> while a device of group <g> is bound to
//   vfio-pci
// with <g> = MockIommuGroup(minor). A device's links are made when its
// directory is first created; rebuilding the root (every Discover) leaves
// the driver a device was moved to alone.
#pragma once

#include <string>
#include <vector>

#include "devices/device_info.h"
#include "devices/pci_driver_control.h"

namespace nvdra::devices {

inline constexpr int kMockVfioMajor = 511;

int MockIommuGroup(int gpu_minor);
// The `device` file's id (by product name) and the `resource` file (BARs).
std::string MockPciDeviceId(const GpuInfo& gpu);
std::string MockPciResource(const GpuInfo& gpu);

Status BuildMockPciSysfs(const std::string& root, const std::vector<GpuInfo>& gpus);

// What the kernel does after a write to the fake sysfs under `root`: a
// device's bus id written to drivers/<d>/bind binds it when it has no driver
// and its driver_override is empty or <d>; written to driver/unbind it
// unbinds it. Anything else refused as the kernel would (ENODEV, EBUSY).
SysfsWriteHook MockPciKernel(const std::string& root);

// Creates a character device node when allowed, else a regular file that
// stands for it; an existing one is left alone.
Status MakeMockDeviceNode(const std::string& path, int major, int minor, mode_t mode);

}  // namespace nvdra::devices
