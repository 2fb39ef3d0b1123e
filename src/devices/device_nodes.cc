#include "devices/device_nodes.h"

#include <sys/stat.h>

#include <algorithm>

#include "devices/nvcaps.h"
#include "devices/proc_devices.h"
#include "util/file_util.h"

namespace nvdra::devices {

DeviceNodes::DeviceNodes(DriverRoot root, std::string proc_devices_path, std::string capabilities_dir,
                         bool allow_regular_files)
    : root_(root),
      proc_devices_(proc_devices_path),
      caps_dir_(std::move(capabilities_dir)),
      allow_regular_files_(allow_regular_files),
      channels_(root, std::move(proc_devices_path), allow_regular_files) {}

DeviceNodes DeviceNodes::ForLib(const DeviceLib& lib) {
  return DeviceNodes(lib.driver_root(), lib.proc_devices_path(), lib.capabilities_dir(),
                     lib.device_nodes_may_be_files());
}

Result<cdi::DeviceNode> DeviceNodes::Existing(const std::string& dev_path) const {
  const DriverRoot::DevRoot dev = root_.LookUpDevRoot();
  const std::string path = dev.ContainerPath(dev_path);
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
  n.host_path = dev.HostPath(dev_path);
  return n;
}

DeviceNodes::Presence DeviceNodes::Present(const std::vector<std::string>& dev_paths) const {
  const DriverRoot::DevRoot dev = root_.LookUpDevRoot();
  Presence out;
  out.dev_root = dev.container();
  // ContainerPath of each, in one buffer.
  std::string path = out.dev_root == "/" ? "" : out.dev_root;
  if (!path.empty() && path.back() == '/') path.pop_back();
  const size_t base = path.size();
  for (size_t i = 0; i < dev_paths.size() && i < 32; ++i) {
    path.resize(base);
    path += dev_paths[i];
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) continue;
    if (S_ISCHR(st.st_mode) || (allow_regular_files_ && S_ISREG(st.st_mode))) out.found |= uint32_t{1} << i;
  }
  return out;
}

Result<cdi::DeviceNode> DeviceNodes::Capability(const std::string& access_rel_path) const {
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

Result<std::vector<cdi::DeviceNode>> DeviceNodes::AllNvidiaNodes() const {
  std::vector<std::string> paths;
  auto add_dir = [&](const std::string& dir, const std::string& prefix) {
    auto names = ListDirectory(root_.ContainerDevPath(dir));
    if (!names.ok()) return;
    for (const auto& n : *names) {
      if (n.rfind(prefix, 0) != 0) continue;
      if (dir == "/dev" &&
          (n.rfind("nvidia-fs", 0) == 0 || n.rfind("nvidia-nvswitch", 0) == 0 || n.rfind("nvidia-nvlink", 0) == 0)) {
        continue;
      }
      paths.push_back(dir + "/" + n);
    }
  };
  add_dir("/dev", "nvidia");
  add_dir("/dev/nvidia-caps", "nvidia-cap");
  add_dir("/dev/nvidia-caps-imex-channels", "channel");
  std::sort(paths.begin(), paths.end());
  std::vector<cdi::DeviceNode> out;
  for (const auto& p : paths) {
    auto n = Existing(p);  // directories (nvidia-caps) and other files drop out here
    if (n.ok()) out.push_back(*n);
  }
  if (out.empty()) return NotFound("no NVIDIA device nodes under " + root_.ContainerDevRoot() + "/dev");
  return out;
}

}  // namespace nvdra::devices
