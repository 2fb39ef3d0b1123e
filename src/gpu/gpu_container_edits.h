// What a GPU claim's containers get: the device nodes (checked
// against the dev root, so a missing node fails Prepare instead of container
// start) and, with driver files attached, the driver's libraries, binaries,
// firmware, IPC sockets and hooks, plus each GPU's DRM nodes, as the NVIDIA
// Container Toolkit's specs carry them.
#pragma once

#include <memory>

#include "cdi/container_edits.h"
#include "devices/device_info.h"
#include "devices/toolkit/container_sources.h"
#include "util/mutex.h"

namespace nvdra::gpu {

class GpuContainerEdits {
 public:
  explicit GpuContainerEdits(devices::ContainerSources sources) : src_(std::move(sources)) {}

  // What every GPU container needs: /dev/nvidiactl (required),
  // /dev/nvidia-uvm, /dev/nvidia-uvm-tools and /dev/nvidia-modeset (when
  // present); with driver files, their mounts, env and hooks too.
  Result<cdi::ContainerEdits> Common() const;
  // The same, shared: every claim's spec holds it rather than a copy
  // (cdi::Spec::shared_edits). A new object when the device nodes found
  // or the driver's files change, so the pointer names the content.
  Result<std::shared_ptr<const cdi::ContainerEdits>> SharedCommon() const;
  // /dev/nvidia<minor>, and the GPU's DRM nodes (with a create-symlinks
  // hook for their /dev/dri/by-path links when hooks are on).
  Result<cdi::ContainerEdits> FullGpu(const devices::GpuInfo& gpu) const;

  // Whether /dev/iommu exists under the dev root (upstream's test for
  // iommufd support).
  bool IommuFdEnabled() const;

  devices::DriverFilesCache* driver_files() const { return src_.driver_files.get(); }
  // The checked device nodes, which a device type builds its own devices'
  // edits from.
  const devices::DeviceNodes& nodes() const { return src_.nodes; }

 private:
  // The last Common(): a claim spec carries every mount of the driver's
  // files, too many to rebuild and deduplicate for each claim. Rebuilt
  // when the device nodes found or the driver's files change; shared by
  // copies of this object, which share its sources.
  struct CommonCache {
    Mutex mu;
    devices::DeviceNodes::Presence presence GUARDED_BY(mu);
    std::shared_ptr<const cdi::ContainerEdits> files GUARDED_BY(mu);
    std::shared_ptr<const cdi::ContainerEdits> edits GUARDED_BY(mu);
  };

  devices::ContainerSources src_;
  std::shared_ptr<CommonCache> common_ = std::make_shared<CommonCache>();
};

}  // namespace nvdra::gpu
