// Where the NVIDIA driver lives, as this process sees it (the container
// driver root, e.g. /driver-root) and as the host sees it (e.g. / or
// /run/nvidia/driver). Finds the NVML library and nvidia-smi the way the
// upstream driver does, and translates device-node paths to host paths for
// CDI specs, which the runtime reads on the host. Device nodes are under the
// driver root when its dev/ holds them (a driver container's own /dev),
// else on the node's /dev (a host driver, or the GPU operator's driver
// container, which creates them on the host's /dev).
#pragma once

#include <string>
#include <vector>

#include "util/status.h"

namespace nvdra::devices {

class DriverRoot {
 public:
  // `node_container_root` and `node_host_root`: the node's own root as this
  // process and as the host see it, whose dev/ holds the device nodes when
  // the driver root's does not: "/" in a plugin container (its /dev shows the
  // host's devices); a mock node's directory in tests.
  DriverRoot(std::string container_root, std::string host_root, std::string node_container_root = "/",
             std::string node_host_root = "/");

  const std::string& container_root() const { return container_root_; }
  const std::string& host_root() const { return host_root_; }

  // The dev root: <root> when <root>/dev is a directory that holds
  // nvidiactl (a driver container's /dev), or a directory while the node's
  // /dev has no nvidiactl either (upstream's rule: <root>/dev when it is a
  // directory); else the node's root ("/").
  std::string ContainerDevRoot() const;
  // The host's view of ContainerDevRoot().
  std::string HostDevRoot() const;

  // Path this process opens for a device node ("/dev/nvidia0").
  std::string ContainerDevPath(const std::string& dev_path) const;
  // Host path for a device node, or "" when it equals `dev_path`.
  std::string HostDevPath(const std::string& dev_path) const;

  // The dev root as one look finds it: the paths of several device nodes
  // from one `stat` (each call above looks again, since the driver's
  // <root>/dev may appear while the plugin runs).
  class DevRoot {
   public:
    std::string ContainerPath(const std::string& dev_path) const;  // as ContainerDevPath
    std::string HostPath(const std::string& dev_path) const;       // as HostDevPath
    const std::string& container() const { return container_; }

   private:
    friend class DriverRoot;
    DevRoot(std::string container, std::string host) : container_(std::move(container)), host_(std::move(host)) {}
    std::string container_, host_;  // "/": the node's own /dev
  };
  DevRoot LookUpDevRoot() const;

  // <root>/{,usr/lib64,usr/lib/x86_64-linux-gnu,...}/<name>, symlinks resolved.
  Result<std::string> FindLibrary(const std::string& name) const;
  // <root>/{opt/bin,usr/bin,usr/sbin,bin,sbin}/<name>.
  Result<std::string> FindBinary(const std::string& name) const;

  static const std::vector<std::string>& LibrarySearchDirs();

  // When the container driver root does not exist: what the flag is, and
  // that a plugin run on the host (not in a container) passes "/". Empty
  // when it exists.
  std::string MissingRootHint() const;

 private:
  std::string container_root_;
  std::string host_root_;
  std::string node_container_root_;
  std::string node_host_root_;
};

}  // namespace nvdra::devices
