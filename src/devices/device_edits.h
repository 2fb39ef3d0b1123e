// CDI container edits for each device kind: which device nodes a container
// needs (with host paths, and type/major/minor where the node is a
// capability), checked against the dev root before a spec is written, so a
// missing node fails Prepare instead of failing container start.
// With driver files attached (UseDriverFiles) the common GPU edits also
// carry the driver's libraries, binaries, firmware, IPC sockets and hooks,
// and each GPU its DRM nodes, as the NVIDIA Container Toolkit's specs do.
// Depends on cdi::ContainerEdits (cdi is a lower layer than devices).
#pragma once

#include <memory>
#include <string>

#include "cdi/container_edits.h"
#include "cdi/spec.h"
#include "devices/device_info.h"
#include "devices/device_lib.h"
#include "devices/toolkit/driver_files.h"
#include "devices/imex_channels.h"

namespace nvdra::devices {

class DeviceEdits {
 public:
  // `capabilities_dir`: /proc/driver/nvidia/capabilities as we see it.
  // `allow_regular_files`: mock roots hold regular files for nodes.
  DeviceEdits(DriverRoot root, std::string proc_devices_path, std::string capabilities_dir,
              bool allow_regular_files = false);
  // The same paths as `lib` uses.
  // `driver_files` may be null (device nodes only).
  static DeviceEdits ForLib(const DeviceLib& lib, std::shared_ptr<DriverFilesCache> driver_files = nullptr);

  void UseDriverFiles(std::shared_ptr<DriverFilesCache> driver_files) { driver_files_ = std::move(driver_files); }
  DriverFilesCache* driver_files() const { return driver_files_.get(); }

  // What every GPU container needs: /dev/nvidiactl (required),
  // /dev/nvidia-uvm, /dev/nvidia-uvm-tools and /dev/nvidia-modeset (when
  // present); with driver files, their mounts, env and hooks too.
  Result<cdi::ContainerEdits> CommonGpuEdits() const;
  // /dev/nvidia<minor>, and the GPU's DRM nodes (with a create-symlinks
  // hook for their /dev/dri/by-path links when hooks are on).
  Result<cdi::ContainerEdits> GpuEdits(const GpuInfo& gpu) const;
  // The parent's edits (GpuEdits of `parent` when given, else its
  // /dev/nvidia<minor>) plus the GI and CI capability nodes
  // /dev/nvidia-caps/nvidia-cap<m> (type c, nvidia-caps major, minor and
  // mode from the access files).
  Result<cdi::ContainerEdits> MigEdits(const MigDeviceInfo& mig, const GpuInfo* parent = nullptr) const;
  // /dev/nvidia-caps-imex-channels/channel<id>, created if needed.
  Result<cdi::ContainerEdits> ImexChannelEdits(int channel) const;
  // The fabric-imex-mgmt capability node an IMEX daemon needs.
  Result<cdi::ContainerEdits> FabricImexMgmtEdits() const;
  // The toolkit's management device ("all"): every NVIDIA character device
  // under the dev root (/dev/nvidia*, /dev/nvidia-caps/nvidia-cap*,
  // /dev/nvidia-caps-imex-channels/channel*; not nvidia-fs, -nvswitch or
  // -nvlink nodes). NotFound when there is none.
  Result<cdi::ContainerEdits> ManagementEdits() const;

  // The ComputeDomain plugin's base spec, as upstream writes it at start:
  // kind <vendor>/device, one device "all" with ManagementEdits(), and the
  // driver files' edits plus NVIDIA_VISIBLE_DEVICES=void at spec level.
  Result<cdi::Spec> BaseSpec(const std::string& vendor) const;

  const ImexChannels& imex_channels() const { return channels_; }

 private:
  Result<cdi::DeviceNode> ExistingNode(const std::string& dev_path) const;
  Result<cdi::DeviceNode> CapNode(const std::string& access_rel_path) const;

  DriverRoot root_;
  std::string proc_devices_;
  std::string caps_dir_;
  bool allow_regular_files_;
  ImexChannels channels_;
  std::shared_ptr<DriverFilesCache> driver_files_;
};

}  // namespace nvdra::devices
