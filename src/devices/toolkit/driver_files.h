// The NVIDIA driver's user-space files a GPU container needs, found the way
// the NVIDIA Container Toolkit's nvcdi finds them: every library whose name
// ends in ".so.<driver version>" (from the driver root's ld.so.cache, and the
// directories those libraries live in, with their vdpau/ subdirectory), the
// legacy NVVM library and the unversioned libraries the toolkit adds
// explicitly, the driver's binaries, its GSP firmware and the IPC sockets of
// its daemons. Files are found under the driver root as this process sees it
// (e.g. /driver-root) and written as host paths (the runtime reads specs on
// the host), mounted at their path inside the driver root.
//
// The result also carries the createContainer hooks the toolkit's specs hold
// (nvidia-cdi-hook create-symlinks, enable-cuda-compat, update-ldcache,
// disable-device-node-modification), rendered only when a hook binary is
// configured.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cdi/container_edits.h"
#include "devices/driver_root.h"
#include "util/mutex.h"
#include "util/status.h"

namespace nvdra::devices {

// The name of the hook's copy in the plugin directory: upstream's, so the
// specs name the same path whichever driver wrote them.
inline constexpr const char* kCdiHookName = "nvidia-cdi-hook";

struct DriverFiles {
  std::string driver_version;
  // Mount lists (host path -> path inside the driver root), in the order
  // the toolkit merges them.
  std::vector<cdi::Mount> libraries;
  std::vector<cdi::Mount> ipc;
  std::vector<cdi::Mount> firmware;
  std::vector<cdi::Mount> binaries;
  // Container paths of the directories holding the versioned libraries
  // (NVIDIA_CTK_LIBCUDA_DIR).
  std::vector<std::string> library_dirs;
  // "<target>::<link>" pairs for create-symlinks (the .so.1 soname links,
  // the .so development links and the toolkit's fixed extras such as
  // libcuda.so), in container paths.
  std::vector<std::string> symlinks;

  // The spec-level edits: env, mounts, and with a non-empty `hook_path`
  // (a host path) the createContainer hooks.
  cdi::ContainerEdits Edits(const std::string& hook_path) const;
};

// Discovers the files of driver `version` under `root`. A driver root that
// is a symlink is resolved first. Libraries that are directories or dangling
// links are skipped; no libcuda or libnvidia-ml of `version` is NotFound
// (the driver is not installed, or NVML reports another version).
Result<DriverFiles> DiscoverDriverFiles(const DriverRoot& root, const std::string& version);

// The per-GPU DRM nodes (/dev/dri/card<N>, /dev/dri/renderD<M>) found
// through /dev/dri/by-path/pci-<busId>-{card,render} under the dev root;
// empty when the GPU has no display engine exposed.
struct DrmNodes {
  std::vector<std::string> nodes;  // "/dev/dri/card1", "/dev/dri/renderD128"
  std::vector<std::string> links;  // "../card1::/dev/dri/by-path/pci-0000:3b:00.0-card", ...
};
DrmNodes FindDrmNodes(const DriverRoot& root, const std::string& pci_bus_id);

// One createContainer hook of nvidia-cdi-hook, shaped as the toolkit shapes
// it (args[0] is the binary's name, env NVIDIA_CTK_DEBUG=false).
cdi::Hook CdiHook(const std::string& hook_path, const std::string& name, std::vector<std::string> args);

// Resolves `path` (absolute, inside `root`) following symlinks within
// `root`: absolute link targets are taken relative to `root`, as a
// chroot would. Returns the resolved path inside `root`.
Result<std::string> ResolveInRoot(const std::string& root, const std::string& path);

// Discovered once, kept while the driver stays: Get() re-discovers when
// `version_source` reports another version than the cached one. The version
// is only asked again when a cached library disappeared (an upgrade removes
// the old files). The files can also change under a steady driver: the
// NVIDIA Container Toolkit's DaemonSet replaced (a new hook binary), a
// library or firmware file removed or added. So each call stats the
// directories that hold the named files and the hook (a few stats: a
// removal or rename in a directory changes its mtime), and discovers again
// when one changed, so the next claim's spec names the files there now.
class DriverFilesCache {
 public:
  using VersionSource = std::function<Result<std::string>()>;
  // Puts the hook back where the specs name it when it is gone (the
  // plugin's own copy); null when the hook is not the plugin's to install.
  using HookInstaller = std::function<Status()>;
  DriverFilesCache(DriverRoot root, VersionSource version_source, std::string hook_path,
                   HookInstaller reinstall_hook = nullptr);

  // The spec-level edits for GPU containers: built once per discovery and
  // shared by every claim's spec until the files change, since a claim
  // spec carries every mount of the driver's files.
  Result<std::shared_ptr<const cdi::ContainerEdits>> CommonEdits() EXCLUDES(mu_);
  Result<DriverFiles> Files() EXCLUDES(mu_);
  // Host path of nvidia-cdi-hook, or "" when hooks are off.
  const std::string& hook_path() const { return hook_path_; }
  const DriverRoot& root() const { return root_; }

  // Moves when the edits changed or a file they named is gone: specs
  // written before may name files that are gone.
  uint64_t generation() EXCLUDES(mu_);
  // The host paths that specs built before the last discoveries named and
  // that were gone when the files were discovered again (the hook
  // included), since the previous call.
  std::vector<std::string> TakeGoneFiles() EXCLUDES(mu_);
  // The host paths the current edits name that do not exist now: the
  // files (through this process's view of the driver root) and the hook
  // once this process has seen it (a hook the flag names on the host may
  // not be visible here). A stat per file: for a check after a change.
  std::vector<std::string> MissingFiles() EXCLUDES(mu_);

 private:
  // What a watched path was at the last look.
  struct Stamp {
    std::string path;
    bool exists = false;
    uint64_t dev = 0, ino = 0;
    int64_t mtime_ns = 0, ctime_ns = 0;
    bool operator==(const Stamp&) const = default;
  };
  static Stamp Look(const std::string& path);
  static bool Unchanged(const Stamp& s);
  std::vector<Stamp> StampsLocked() const REQUIRES(mu_);
  // The container view of a file's path inside the driver root.
  std::string InRoot(const std::string& container_path) const REQUIRES(mu_);
  std::vector<std::string> MissingLocked() const REQUIRES(mu_);
  Status RefreshLocked() REQUIRES(mu_);
  void Replace(DriverFiles files) REQUIRES(mu_);
  bool LookAgainLocked() const REQUIRES(mu_);
  DriverRoot root_;
  VersionSource version_source_;
  std::string hook_path_;
  HookInstaller reinstall_hook_;
  Mutex mu_;
  bool have_ GUARDED_BY(mu_) = false;
  DriverFiles files_ GUARDED_BY(mu_);
  std::shared_ptr<const cdi::ContainerEdits> edits_ GUARDED_BY(mu_);
  // A cached library (container view) whose absence means another driver.
  std::string probe_ GUARDED_BY(mu_);
  // The driver root as this process sees it, symlinks resolved.
  std::string base_ GUARDED_BY(mu_);
  std::vector<Stamp> stamps_ GUARDED_BY(mu_);
  bool hook_seen_ GUARDED_BY(mu_) = false;
  uint64_t generation_ GUARDED_BY(mu_) = 0;
  std::vector<std::string> gone_ GUARDED_BY(mu_);
  std::vector<std::string> missing_ GUARDED_BY(mu_);  // named and missing after the last discovery
};

// Sets up the hook binary the specs name, as upstream does with its own: a
// non-empty `flag_path` (--nvidia-cdi-hook-path) is used as is; otherwise
// `source` (nvdra-cdi-hook beside the plugin, ShippedCdiHookPath) is copied
// into `plugin_dir` as nvidia-cdi-hook with mode 0755 (temporary file,
// fsync, rename: a runtime starting a container meanwhile runs the old copy
// or the new one, never a partial file) and that copy is used, because the
// plugin directory is the same path on the host. No `source` is an error
// naming both ways to provide one.
Result<std::string> InstallCdiHook(const std::string& flag_path, const std::string& source,
                                   const std::string& plugin_dir);

}  // namespace nvdra::devices
