// IMEX channel device nodes: /dev/nvidia-caps-imex-channels/channel<N> under
// the dev root, with the major that nvidia-caps-imex-channels has in
// /proc/devices *now*. The major is assigned at module load, so it is read on
// every use and never taken from a previous boot; a node with a stale major
// is replaced.
#pragma once

#include <string>

#include "cdi/container_edits.h"
#include "devices/driver_root.h"
#include "util/status.h"

namespace nvdra::devices {

class ImexChannels {
 public:
  // `allow_regular_files`: a regular file may stand for a node (mock root),
  // and is created when mknod is not permitted.
  ImexChannels(DriverRoot root, std::string proc_devices_path, bool allow_regular_files = false);

  Result<int> Major() const;

  // Checks channel<id> exists with the current major and minor id, creating
  // (or replacing) it when we may.
  Status EnsureChannel(int id) const;

  // The CDI device node for channel<id> (type c, major, minor, mode 0666),
  // after EnsureChannel.
  Result<cdi::DeviceNode> ChannelNode(int id) const;

  static std::string ChannelPath(int id);  // "/dev/nvidia-caps-imex-channels/channel<id>"

 private:
  DriverRoot root_;
  std::string proc_devices_;
  bool allow_regular_files_;
};

}  // namespace nvdra::devices
