// Whether the NVIDIA driver is loaded, and which one, from what the node
// shows of it without NVML: the kernel module's version file
// (/proc/driver/nvidia/version), the GPU operator validator's driver-ready
// marker where the node has one, and the driver's library files a plugin
// resolved. DriverWatch turns those looks into the two transitions a plugin
// acts on: the driver went away, and a driver (the same or another version)
// came back. It holds nothing open between looks, so it never keeps a
// driver from unloading.
#pragma once

#include <string>
#include <vector>

#include "util/status.h"

namespace nvdra::devices {

// "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.158.01  Release ..."
// (also the open module's "... Open Kernel Module for x86_64  570.158.01 ...")
// -> "570.158.01".
Result<std::string> ParseKernelModuleVersion(const std::string& text);

// True for the NVML answers that mean the driver is not there (or not yet):
// NVML_ERROR_DRIVER_NOT_LOADED, NVML_ERROR_UNINITIALIZED.
bool IsDriverNotLoaded(const Status& status);

struct DriverWatchPaths {
  std::string version_file;            // /proc/driver/nvidia/version
  std::string ready_marker;            // "" where the node has none
  std::vector<std::string> libraries;  // files of the running driver (this process's view)
};

struct DriverPresence {
  bool present = false;
  std::string version;  // when present
  std::string reason;   // why not present (for log lines)
};

// One look. The marker counts only while its directory exists (a node the
// GPU operator manages); a listed library that is gone means the running
// driver's files are being replaced, whatever the version file says.
DriverPresence ProbeDriver(const DriverWatchPaths& paths);

// The files under any of `prefixes` that this process has open
// (/proc/self/fd) or mapped (/proc/self/maps), sorted and unique: what would
// keep the driver's modules from unloading or its old files alive.
std::vector<std::string> FilesHeldBySelf(const std::vector<std::string>& prefixes);

enum class DriverTransition { kNone, kGone, kBack };

struct DriverChange {
  DriverTransition what = DriverTransition::kNone;
  std::string old_version;  // the last version seen loaded
  std::string new_version;  // kBack: the version now loaded
  std::string reason;       // kGone: what was seen
};

// The driver's state as the plugin last acted on it. A version that changes
// between two looks is a driver that went and came back in between: kGone
// first, kBack at the next look.
class DriverWatch {
 public:
  explicit DriverWatch(std::string loaded_version) : version_(std::move(loaded_version)) {}

  DriverChange Observe(const DriverPresence& presence);
  // An NVML call failed: a driver-not-loaded answer is the driver gone.
  DriverChange ObserveNvml(const Status& status);
  // Acting on kBack failed (discovery not ready yet): the next look that
  // sees the driver reports kBack again.
  void BackFailed() {
    loaded_ = false;
    version_ = previous_;
  }

  bool loaded() const { return loaded_; }
  const std::string& version() const { return version_; }

 private:
  DriverChange Gone(std::string reason);
  bool loaded_ = true;
  std::string version_;
  std::string previous_;  // before the last kBack
};

}  // namespace nvdra::devices
