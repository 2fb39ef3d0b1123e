// CDI container edits for each device kind: which device nodes a container
// needs (with host paths, and type/major/minor where the node is a
// capability), checked against the dev root before a spec is written, so a
// missing node fails Prepare instead of failing container start.
// Depends on cdi::ContainerEdits (cdi is a lower layer than devices).
#pragma once

#include <string>

#include "cdi/container_edits.h"
#include "devices/device_info.h"
#include "devices/device_lib.h"
#include "devices/imex_channels.h"

namespace nvdra::devices {

class DeviceEdits {
 public:
  // `capabilities_dir`: /proc/driver/nvidia/capabilities as we see it.
  // `allow_regular_files`: mock roots hold regular files for nodes.
  DeviceEdits(DriverRoot root, std::string proc_devices_path, std::string capabilities_dir,
              bool allow_regular_files = false);
  // The same paths as `lib` uses.
  static DeviceEdits ForLib(const DeviceLib& lib);

  // Nodes every GPU container needs: /dev/nvidiactl (required),
  // /dev/nvidia-uvm and /dev/nvidia-uvm-tools (when present).
  Result<cdi::ContainerEdits> CommonGpuEdits() const;
  // /dev/nvidia<minor>.
  Result<cdi::ContainerEdits> GpuEdits(const GpuInfo& gpu) const;
  // The parent's /dev/nvidia<minor> plus the GI and CI capability nodes
  // /dev/nvidia-caps/nvidia-cap<m> (type c, nvidia-caps major, minor and
  // mode from the access files).
  Result<cdi::ContainerEdits> MigEdits(const MigDeviceInfo& mig) const;
  // /dev/nvidia-caps-imex-channels/channel<id>, created if needed.
  Result<cdi::ContainerEdits> ImexChannelEdits(int channel) const;
  // The fabric-imex-mgmt capability node an IMEX daemon needs.
  Result<cdi::ContainerEdits> FabricImexMgmtEdits() const;

  const ImexChannels& imex_channels() const { return channels_; }

 private:
  Result<cdi::DeviceNode> ExistingNode(const std::string& dev_path) const;
  Result<cdi::DeviceNode> CapNode(const std::string& access_rel_path) const;

  DriverRoot root_;
  std::string proc_devices_;
  std::string caps_dir_;
  bool allow_regular_files_;
  ImexChannels channels_;
};

}  // namespace nvdra::devices
