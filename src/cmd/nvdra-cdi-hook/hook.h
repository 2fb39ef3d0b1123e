// The hooks of nvdra-cdi-hook, the OCI createContainer hook nvdra's CDI
// specs name: the subcommands and flags of the NVIDIA Container Toolkit's
// nvidia-cdi-hook that the specs use (create-symlinks, update-ldcache,
// enable-cuda-compat, disable-device-node-modification, and chmod), with
// its behaviour. Each reads the OCI container state from stdin, takes the
// root file system from the bundle's config.json, and changes only what
// lies inside it (in_root.h). Running a hook twice leaves the container as
// running it once.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "cmd/nvdra-cdi-hook/in_root.h"

namespace nvdra::cdihook {

// Where a hook's messages go; debug lines only with --debug or
// NVIDIA_CTK_DEBUG=true, info lines not with --quiet.
struct Logger {
  std::ostream* out = nullptr;
  bool debug = false;
  bool quiet = false;
  void Debug(const std::string& msg) const;
  void Info(const std::string& msg) const;
  void Warning(const std::string& msg) const;
  void Error(const std::string& msg) const;
};

// What the hooks read from the host besides their arguments; tests point
// them elsewhere.
struct HostPaths {
  std::string driver_params = "/proc/driver/nvidia/params";
};

// Runs the command line `args` (args[0] is the program); returns the exit
// status. `state` is the container state (the runtime's stdin); `env`
// looks up an environment variable.
int RunHook(const std::vector<std::string>& args, std::istream& state, std::ostream& log,
            const HostPaths& host = HostPaths(), std::optional<std::string> (*env)(const char*) = nullptr);

// The container's root file system (a host path): the state's "root", else
// the bundle's config.json root.path, taken relative to the bundle unless
// absolute. Throws with upstream's messages.
std::string ContainerRootPath(std::istream& state);

// The hooks themselves, on an opened root.
void CreateSymlinks(const ContainerRoot& root, const std::vector<std::string>& links, const Logger& log);
void UpdateLdcache(const ContainerRoot& root, const std::vector<std::string>& folders, const std::string& ldconfig_path,
                   const Logger& log);
void EnableCudaCompat(const ContainerRoot& root, const std::string& host_driver_version,
                      const std::string& host_cuda_version, const std::string& compat_dir, const Logger& log);
void DisableDeviceNodeModification(const ContainerRoot& root, const std::string& host_params_path, const Logger& log);
void Chmod(const ContainerRoot& root, const std::vector<std::string>& paths, mode_t mode, const Logger& log);

// The driver's params with "ModifyDeviceFiles: 1" turned to 0; "" when
// there is nothing to change.
std::string ParamsWithoutDeviceModification(const std::string& params);

// The drop-in files the hooks write into the container's
// /etc/ld.so.conf.d/ (fixed names, so a second run rewrites the same file).
inline constexpr const char* kLdsoconfd = "/etc/ld.so.conf.d";
inline constexpr const char* kFoldersDropIn = "/etc/ld.so.conf.d/00-nvcr-nvdra.conf";
inline constexpr const char* kSystemDirsDropIn = "/etc/ld.so.conf.d/zz-nvcr-nvdra.conf";
inline constexpr const char* kCompatDropIn = "/etc/ld.so.conf.d/00-compat-nvdra.conf";

}  // namespace nvdra::cdihook
