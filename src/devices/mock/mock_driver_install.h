// The user-space half of the mock driver: a driver installation for the
// profile's driver version inside the mock driver root, shaped like the
// NVIDIA .run installer leaves it, so that driver-file discovery, the CDI
// hooks and a real container runtime all run against it:
//   usr/lib/x86_64-linux-gnu/lib*.so.<version> (empty files, no ELF) with
//     their soname and .so links, vdpau/, the legacy NVVM library
//   etc/ld.so.cache                       (glibc format, 64-bit entries)
//   usr/bin/nvidia-smi                    (shell script: -L lists the GPUs
//                                          whose device nodes it can see)
//   usr/bin/nvidia-{debugdump,persistenced,cuda-mps-control,cuda-mps-server}
//   lib/firmware/nvidia/<version>/gsp_*.bin
//   run/nvidia-persistenced/socket        (a Unix socket)
//   dev/dri/card<N> dev/dri/renderD<M> dev/dri/by-path/pci-<busId>-{card,render}
// The DRM nodes go to the dev root (MockInstallPaths): all in one directory
// for the plain mock; for the GPU operator's layout the driver's files in
// <node>/run/nvidia/driver and the nodes on <node>/dev. There is no
// nvidia-cdi-hook: the plugins copy their own (nvdra-cdi-hook).
#pragma once

#include <string>
#include <vector>

#include "devices/mock/mock_profile.h"
#include "util/status.h"

namespace nvdra::devices {

inline constexpr int kMockDrmMajor = 226;

struct MockInstallPaths {
  std::string driver_root;  // libraries, tools, firmware, ld.so.cache, persistenced socket
  std::string dev_root;     // dev/nvidia-modeset, dev/dri
};

// Creates or refreshes the installation; existing files with the right
// content are left alone.
Status BuildMockDriverInstall(const MockInstallPaths& paths, const MockProfile& profile);
// All in `root`.
Status BuildMockDriverInstall(const std::string& root, const MockProfile& profile);

// Paths inside `root`.
inline constexpr const char* kMockLibDir = "/usr/lib/x86_64-linux-gnu";

// Removes what BuildMockDriverInstall installed for `version` from the
// driver root (its libraries with their soname and .so links, its firmware,
// ld.so.cache), as the driver's uninstaller does before a new version goes
// in; tools, sockets and DRM nodes stay (the next install rewrites them).
Status RemoveMockDriverInstall(const std::string& driver_root, const std::string& version);

// The kernel module's version file under the mock's proc/ and its text
// (/proc/driver/nvidia/version: present while the module is loaded).
inline constexpr const char* kMockKernelVersionFile = "/proc/driver/nvidia/version";
std::string MockKernelVersionText(const std::string& version);

// The versioned library names the installation holds for `version`
// (e.g. "libcuda.so.570.158.01"), for tests.
std::vector<std::string> MockDriverLibraries(const std::string& version);

}  // namespace nvdra::devices
