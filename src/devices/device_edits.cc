#include "devices/device_edits.h"

#include <sys/stat.h>

#include <algorithm>

#include "devices/nvcaps.h"
#include "devices/proc_devices.h"
#include "util/file_util.h"

namespace nvdra::devices {

DeviceEdits::DeviceEdits(DriverRoot root, std::string proc_devices_path, std::string capabilities_dir,
                         bool allow_regular_files)
    : root_(root), proc_devices_(proc_devices_path), caps_dir_(std::move(capabilities_dir)),
      allow_regular_files_(allow_regular_files),
      channels_(root, std::move(proc_devices_path), allow_regular_files) {}

DeviceEdits DeviceEdits::ForLib(const DeviceLib& lib, std::shared_ptr<DriverFilesCache> driver_files) {
  DeviceEdits e(lib.driver_root(), lib.proc_devices_path(), lib.capabilities_dir(), lib.device_nodes_may_be_files());
  e.UseDriverFiles(std::move(driver_files));
  return e;
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
  for (const char* optional : {"/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"}) {
    // nvidia-uvm is loaded on demand; CUDA works without the node at start.
    auto n = ExistingNode(optional);
    if (n.ok()) e.device_nodes.push_back(*n);
  }
  if (driver_files_ != nullptr) {
    auto files = driver_files_->CommonEdits();
    if (!files.ok()) return files.status().Wrap("driver files");
    e.Append(*files);
  }
  return e;
}

Result<cdi::ContainerEdits> DeviceEdits::GpuEdits(const GpuInfo& gpu) const {
  cdi::ContainerEdits e;
  NVDRA_ASSIGN_OR_RETURN(auto n, ExistingNode("/dev/nvidia" + std::to_string(gpu.minor)));
  e.device_nodes.push_back(n);
  if (driver_files_ == nullptr || gpu.pci_bus_id.empty()) return e;
  // DRM nodes only with driver files: they are part of the toolkit's full
  // device spec, which is what driver files stand for.
  DrmNodes drm = FindDrmNodes(root_, gpu.pci_bus_id);
  for (const auto& path : drm.nodes) {
    auto node = ExistingNode(path);
    if (node.ok()) e.device_nodes.push_back(*node);
  }
  if (!drm.links.empty() && !driver_files_->hook_path().empty()) {
    std::vector<std::string> args;
    for (const auto& l : drm.links) {
      args.push_back("--link");
      args.push_back(l);
    }
    e.hooks.push_back(CdiHook(driver_files_->hook_path(), "create-symlinks", std::move(args)));
  }
  return e;
}

Result<cdi::ContainerEdits> DeviceEdits::MigEdits(const MigDeviceInfo& mig, const GpuInfo* parent_gpu) const {
  cdi::ContainerEdits e;
  if (parent_gpu != nullptr) {
    NVDRA_ASSIGN_OR_RETURN(e, GpuEdits(*parent_gpu));
  } else {
    NVDRA_ASSIGN_OR_RETURN(auto parent, ExistingNode("/dev/nvidia" + std::to_string(mig.parent_minor)));
    e.device_nodes.push_back(parent);
  }
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

Result<cdi::ContainerEdits> DeviceEdits::ManagementEdits() const {
  cdi::ContainerEdits e;
  std::vector<std::string> paths;
  auto add_dir = [&](const std::string& dir, const std::string& prefix) {
    auto names = ListDirectory(root_.ContainerDevPath(dir));
    if (!names.ok()) return;
    for (const auto& n : *names) {
      if (n.rfind(prefix, 0) != 0) continue;
      if (dir == "/dev" && (n.rfind("nvidia-fs", 0) == 0 || n.rfind("nvidia-nvswitch", 0) == 0 ||
                            n.rfind("nvidia-nvlink", 0) == 0)) {
        continue;
      }
      paths.push_back(dir + "/" + n);
    }
  };
  add_dir("/dev", "nvidia");
  add_dir("/dev/nvidia-caps", "nvidia-cap");
  add_dir("/dev/nvidia-caps-imex-channels", "channel");
  std::sort(paths.begin(), paths.end());
  for (const auto& p : paths) {
    auto n = ExistingNode(p);  // directories (nvidia-caps) and other files drop out here
    if (n.ok()) e.device_nodes.push_back(*n);
  }
  if (e.device_nodes.empty()) {
    return NotFound("no NVIDIA device nodes under " + root_.ContainerDevRoot() + "/dev");
  }
  return e;
}

Result<cdi::Spec> DeviceEdits::BaseSpec(const std::string& vendor) const {
  cdi::Spec spec;
  spec.kind = vendor + "/device";
  NVDRA_ASSIGN_OR_RETURN(auto all, ManagementEdits());
  spec.devices.push_back({"all", std::move(all)});
  if (driver_files_ != nullptr) {
    auto files = driver_files_->CommonEdits();
    if (!files.ok()) return files.status().Wrap("driver files");
    spec.edits = *files;
  }
  spec.edits.env.push_back("NVIDIA_VISIBLE_DEVICES=void");
  return spec;
}

}  // namespace nvdra::devices
