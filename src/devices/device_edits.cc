#include "devices/device_edits.h"

#include <sys/stat.h>

#include "devices/nvcaps.h"
#include "devices/proc_devices.h"
#include "util/file_util.h"

namespace nvdra::devices {

DeviceEdits::DeviceEdits(DriverRoot root, std::string proc_devices_path, std::string capabilities_dir,
                         bool allow_regular_files)
    : root_(root), proc_devices_(proc_devices_path), caps_dir_(std::move(capabilities_dir)),
      allow_regular_files_(allow_regular_files),
      channels_(root, std::move(proc_devices_path), allow_regular_files) {}

DeviceEdits DeviceEdits::ForLib(const DeviceLib& lib) {
  return DeviceEdits(lib.driver_root(), lib.proc_devices_path(), lib.capabilities_dir(),
                     lib.device_nodes_may_be_files());
}

Result<cdi::DeviceNode> DeviceEdits::ExistingNode(const std::string& dev_path) const {
  std::string path = root_.ContainerDevPath(dev_path);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return FailedPrecondition("device node " + path + " is missing: " + ErrnoText(errno) +
                              " (is the NVIDIA driver loaded and are its device nodes created, e.g. by "
                              "nvidia-modprobe or udev?)");
  }
  if (!S_ISCHR(st.st_mode) && !(allow_regular_files_ && S_ISREG(st.st_mode))) {
    return FailedPrecondition(path + " is not a character device");
  }
  cdi::DeviceNode n;
  n.path = dev_path;
  n.host_path = root_.HostDevPath(dev_path);
  return n;
}

Result<cdi::DeviceNode> DeviceEdits::CapNode(const std::string& access_rel_path) const {
  NVDRA_ASSIGN_OR_RETURN(NvcapAccess access, ReadNvcapAccess(JoinPath(caps_dir_, access_rel_path)));
  NVDRA_ASSIGN_OR_RETURN(int major, ReadCharDeviceMajor(proc_devices_, "nvidia-caps"));
  cdi::DeviceNode n;
  n.path = "/dev/nvidia-caps/nvidia-cap" + std::to_string(access.minor);
  n.host_path = root_.HostDevPath(n.path);
  n.type = "c";
  n.major = major;
  n.minor = access.minor;
  n.file_mode = access.mode;
  return n;
}

Result<cdi::ContainerEdits> DeviceEdits::CommonGpuEdits() const {
  cdi::ContainerEdits e;
  NVDRA_ASSIGN_OR_RETURN(auto ctl, ExistingNode("/dev/nvidiactl"));
  e.device_nodes.push_back(ctl);
  for (const char* optional : {"/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"}) {
    // nvidia-uvm is loaded on demand; CUDA works without the node at start.
    auto n = ExistingNode(optional);
    if (n.ok()) e.device_nodes.push_back(*n);
  }
  return e;
}

Result<cdi::ContainerEdits> DeviceEdits::GpuEdits(const GpuInfo& gpu) const {
  cdi::ContainerEdits e;
  NVDRA_ASSIGN_OR_RETURN(auto n, ExistingNode("/dev/nvidia" + std::to_string(gpu.minor)));
  e.device_nodes.push_back(n);
  return e;
}

Result<cdi::ContainerEdits> DeviceEdits::MigEdits(const MigDeviceInfo& mig) const {
  cdi::ContainerEdits e;
  NVDRA_ASSIGN_OR_RETURN(auto parent, ExistingNode("/dev/nvidia" + std::to_string(mig.parent_minor)));
  e.device_nodes.push_back(parent);
  NVDRA_ASSIGN_OR_RETURN(auto gi, CapNode(MigGiAccessPath(mig.parent_minor, mig.gi_id)));
  NVDRA_ASSIGN_OR_RETURN(auto ci, CapNode(MigCiAccessPath(mig.parent_minor, mig.gi_id, mig.ci_id)));
  e.device_nodes.push_back(gi);
  e.device_nodes.push_back(ci);
  return e;
}

Result<cdi::ContainerEdits> DeviceEdits::ImexChannelEdits(int channel) const {
  cdi::ContainerEdits e;
  NVDRA_ASSIGN_OR_RETURN(auto n, channels_.ChannelNode(channel));
  e.device_nodes.push_back(n);
  return e;
}

Result<cdi::ContainerEdits> DeviceEdits::FabricImexMgmtEdits() const {
  cdi::ContainerEdits e;
  NVDRA_ASSIGN_OR_RETURN(auto n, CapNode(kFabricImexMgmtCap));
  e.device_nodes.push_back(n);
  return e;
}

}  // namespace nvdra::devices
