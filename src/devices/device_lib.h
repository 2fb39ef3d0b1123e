// Hardware access behind one interface with two backends, chosen at start:
// NVML (libnvidia-ml.so.1 loaded with dlopen from the driver root,
// devices/nvml/) and a mock built from a hardware profile (devices/mock/);
// OpenDeviceLib (devices/backends/open_device_lib.h) picks one. Everything downstream (publishing, CDI
// edits, IMEX channels) uses the driver root the backend reports, so the mock
// exercises the same code as real hardware.
#pragma once

#include <limits.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "devices/device_health.h"
#include "devices/device_info.h"
#include "devices/driver_root.h"
#include "devices/fabric_manager.h"
#include "devices/gpu_control.h"
#include "devices/pci_driver_control.h"
#include "util/status.h"

namespace nvdra::devices {

// The CDI hook nvdra ships: nvdra-cdi-hook in the directory of the running
// program (/proc/self/exe), as the image installs it beside the plugins and
// as a build leaves it beside them in build/bin.
inline std::string ShippedCdiHookPath() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  std::string exe = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  auto slash = exe.find_last_of('/');
  std::string dir = slash == std::string::npos ? std::string("/usr/bin") : exe.substr(0, slash == 0 ? 1 : slash);
  return (dir == "/" ? std::string() : dir) + "/nvdra-cdi-hook";
}

struct DeviceLibOptions {
  // Mock: a built-in profile name (h100x8, a100-mig, gb200x4) or a file.
  // Empty selects NVML.
  std::string mock_hardware;
  // Mock: where the fake driver root is built (e.g. <state-dir>/mock-driver-root).
  std::string mock_root;
  // Mock: "plain" (or empty) or "gpu-operator": mock_root is then a node's
  // root with the driver under run/nvidia/driver (mock_device_lib.h).
  std::string mock_layout;
  // NVML: the driver root as mounted in this container and as the host sees it.
  std::string container_driver_root = "/driver-root";
  std::string host_driver_root = "/";
  // Replaces /proc/devices for major lookups (upstream ALT_PROC_DEVICES_PATH).
  std::string proc_devices_path;
  std::string sysfs_root = "/sys";
  // NVML: the kernel module's version file the driver watch reads (the
  // mock has its own, under its root).
  std::string driver_version_file = "/proc/driver/nvidia/version";
  // --additional-xids-to-ignore.
  std::string additional_xids_to_ignore;
};

class DeviceLib {
 public:
  virtual ~DeviceLib() = default;
  // Enumerates GPUs and MIG devices. A failure is an error to retry, never an
  // empty inventory.
  virtual Result<NodeInventory> Discover() = 0;
  virtual GpuControl& control() = 0;
  // The PCI drivers of the node's devices, through sysfs (passthrough).
  virtual PciDriverControl& pci() = 0;
  // Fabric Manager (FabricManagerPartitioning), opened once at start;
  // nullptr where the node has no fabric that needs it. An error: the node
  // has one, but Fabric Manager cannot be reached.
  virtual Result<std::unique_ptr<FabricManager>> OpenFabricManager() { return std::unique_ptr<FabricManager>(); }
  // A new health source for this backend (not started).
  virtual std::unique_ptr<DeviceHealthSource> NewHealthSource() = 0;
  virtual const DriverRoot& driver_root() const = 0;
  // The file that stands for /proc/devices.
  virtual std::string proc_devices_path() const = 0;
  // The /proc/driver/nvidia/capabilities directory as this process sees it.
  virtual std::string capabilities_dir() const = 0;
  virtual std::string backend_name() const = 0;
  // The kernel module's version file (/proc/driver/nvidia/version as this
  // process sees the host's): present while the driver is loaded.
  virtual std::string driver_version_file() const { return "/proc/driver/nvidia/version"; }
  // The GPU operator validator's driver-ready marker where the node has one
  // ("" where it does not): written once the operator's driver works,
  // removed while the driver manager replaces it.
  virtual std::string driver_ready_marker() const { return ""; }
  // The driver is going away (an upgrade): let go of everything of it this
  // library holds (NVML unloaded, its descriptors closed); calls meanwhile
  // fail as NVML's do without a driver. AcquireDriver loads it again once
  // it is back.
  virtual void ReleaseDriver() {}
  virtual Status AcquireDriver() { return Status::Ok(); }
  // True when regular files may stand for device nodes (the mock root).
  virtual bool device_nodes_may_be_files() const { return false; }
  // The CDI hook this process ships (copied into the plugin directory when
  // --nvidia-cdi-hook-path is empty): nvdra-cdi-hook beside the program.
  virtual std::string cdi_hook_source() const { return ShippedCdiHookPath(); }
};

}  // namespace nvdra::devices
