#include "devices/driver_root.h"

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

#include "util/file_util.h"

namespace nvdra::devices {

namespace {

bool IsDirectory(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string Normalize(std::string p) {
  if (p.empty()) return "/";
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

}  // namespace

DriverRoot::DriverRoot(std::string container_root, std::string host_root, std::string node_container_root,
                       std::string node_host_root)
    : container_root_(Normalize(std::move(container_root))),
      host_root_(Normalize(std::move(host_root))),
      node_container_root_(Normalize(std::move(node_container_root))),
      node_host_root_(Normalize(std::move(node_host_root))) {}

std::string DriverRoot::ContainerDevRoot() const { return LookUpDevRoot().container_; }

DriverRoot::DevRoot DriverRoot::LookUpDevRoot() const {
  // The control node decides: every NVIDIA device needs it, and the driver
  // creates it first.
  if (container_root_ != node_container_root_ && IsDirectory(JoinPath(container_root_, "dev")) &&
      (PathExists(JoinPath(container_root_, "dev/nvidiactl")) ||
       !PathExists(JoinPath(node_container_root_, "dev/nvidiactl")))) {
    return DevRoot(container_root_, host_root_);
  }
  return DevRoot(node_container_root_, node_host_root_);
}

std::string DriverRoot::DevRoot::ContainerPath(const std::string& dev_path) const {
  return container_ == "/" ? dev_path : JoinPath(container_, dev_path);
}

std::string DriverRoot::DevRoot::HostPath(const std::string& dev_path) const {
  return host_ == "/" ? "" : JoinPath(host_, dev_path);
}

std::string DriverRoot::HostDevRoot() const { return LookUpDevRoot().host_; }

std::string DriverRoot::ContainerDevPath(const std::string& dev_path) const {
  return LookUpDevRoot().ContainerPath(dev_path);
}

std::string DriverRoot::HostDevPath(const std::string& dev_path) const { return LookUpDevRoot().HostPath(dev_path); }

std::string DriverRoot::MissingRootHint() const {
  struct stat st;
  if (::stat(container_root_.c_str(), &st) == 0) return "";
  return "--container-driver-root (DRIVER_ROOT_CTR_PATH) is " + container_root_ +
         ", which does not exist: it is where the host's driver root is mounted in the plugin's container;"
         " running on the host, pass --container-driver-root /";
}

const std::vector<std::string>& DriverRoot::LibrarySearchDirs() {
  static const std::vector<std::string> dirs = {"/",
                                                "/usr/lib64",
                                                "/usr/lib/x86_64-linux-gnu",
                                                "/usr/lib/aarch64-linux-gnu",
                                                "/lib64",
                                                "/lib/x86_64-linux-gnu",
                                                "/lib/aarch64-linux-gnu"};
  return dirs;
}

Result<std::string> DriverRoot::FindLibrary(const std::string& name) const {
  for (const auto& dir : LibrarySearchDirs()) {
    std::string candidate = JoinPath(JoinPath(container_root_, dir), name);
    char resolved[PATH_MAX];
    if (::realpath(candidate.c_str(), resolved) != nullptr) return std::string(resolved);
  }
  if (std::string hint = MissingRootHint(); !hint.empty()) return NotFound(name + " not found: " + hint);
  return NotFound(name + " not found under driver root " + container_root_ +
                  " (searched /, /usr/lib64, /usr/lib/<arch>-linux-gnu, /lib64, /lib/<arch>-linux-gnu);"
                  " check --container-driver-root and that the NVIDIA driver is installed");
}

Result<std::string> DriverRoot::FindBinary(const std::string& name) const {
  for (const char* dir : {"/opt/bin", "/usr/bin", "/usr/sbin", "/bin", "/sbin"}) {
    std::string candidate = JoinPath(JoinPath(container_root_, dir), name);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  if (std::string hint = MissingRootHint(); !hint.empty()) return NotFound(name + " not found: " + hint);
  return NotFound(name + " not found under driver root " + container_root_);
}

}  // namespace nvdra::devices
