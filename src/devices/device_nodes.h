// The NVIDIA device nodes under a driver root, as a container needs them:
// each node checked against the dev root before a spec names it (a missing
// node fails Prepare instead of failing container start), capability nodes
// with type/major/minor/mode from their access files, IMEX channel nodes
// created when missing. What a kind's containers get from these is the
// kind's business (gpu/gpu_edits.h, computedomain/compute_domain_edits.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cdi/container_edits.h"
#include "devices/device_lib.h"
#include "devices/driver_root.h"
#include "devices/imex_channels.h"
#include "util/status.h"

namespace nvdra::devices {

class DeviceNodes {
 public:
  // `capabilities_dir`: /proc/driver/nvidia/capabilities as we see it.
  // `allow_regular_files`: mock roots hold regular files for nodes.
  DeviceNodes(DriverRoot root, std::string proc_devices_path, std::string capabilities_dir,
              bool allow_regular_files = false);
  // The same paths as `lib` uses.
  static DeviceNodes ForLib(const DeviceLib& lib);

  // `dev_path` ("/dev/nvidiactl") if it exists under the dev root as a
  // character device; FailedPrecondition with what to check otherwise.
  Result<cdi::DeviceNode> Existing(const std::string& dev_path) const;
  // Which of `dev_paths` (at most 32) Existing finds now, under which dev
  // root: one look-up of the dev root and a stat per path, for a check on
  // every claim that builds the nodes only when the answer changes.
  struct Presence {
    std::string dev_root;  // the dev root's container path
    uint32_t found = 0;    // bit i: dev_paths[i]
    bool operator==(const Presence&) const = default;
  };
  Presence Present(const std::vector<std::string>& dev_paths) const;
  // The capability node /dev/nvidia-caps/nvidia-cap<m> whose access file is
  // `access_rel_path` under the capabilities dir (type c, nvidia-caps major,
  // minor and mode from the access file).
  Result<cdi::DeviceNode> Capability(const std::string& access_rel_path) const;
  // /dev/nvidia-caps-imex-channels/channel<id>, created if needed.
  Result<cdi::DeviceNode> ImexChannel(int id) const { return channels_.ChannelNode(id); }
  // Every NVIDIA character device under the dev root (/dev/nvidia*,
  // /dev/nvidia-caps/nvidia-cap*, /dev/nvidia-caps-imex-channels/channel*;
  // not nvidia-fs, -nvswitch or -nvlink nodes), sorted by path. NotFound
  // when there is none.
  Result<std::vector<cdi::DeviceNode>> AllNvidiaNodes() const;

  const DriverRoot& root() const { return root_; }
  const ImexChannels& imex_channels() const { return channels_; }

 private:
  DriverRoot root_;
  std::string proc_devices_;
  std::string caps_dir_;
  bool allow_regular_files_;
  ImexChannels channels_;
};

}  // namespace nvdra::devices
