// Full GPUs: each GPU whose MIG mode is off, published as gpu-<minor>, with
// GpuConfig; its containers get /dev/nvidia<minor> and its DRM nodes. With
// dynamic MIG (`partitionable`), a GPU dynamic MIG serves is published as
// upstream does: whatever its MIG mode when that toggles without a reset,
// with the largest MIG capacities, consuming all of its counter set, and
// holding all of its memory slices in the ledger.
#pragma once

#include "gpu/gpu_device_type.h"

namespace nvdra::gpu {

class FullGpuType final : public GpuDeviceType {
 public:
  // `passthrough`: a GPU's vfio twin may be prepared (PassthroughSupport),
  // so a claim on it holds its PCI device too (vfio_type.h).
  explicit FullGpuType(bool partitionable = false, bool passthrough = false)
      : partitionable_(partitionable), passthrough_(passthrough) {}
  std::string_view name() const override;
  std::string_view config_kind() const override { return "GpuConfig"; }
  std::optional<config::Config> DefaultConfig(const config::FeatureGates&) const override { return GpuConfig{}; }
  std::vector<GpuDevice> Devices(const devices::NodeInventory& inventory) const override;
  model::PublishedDevice Publish(const GpuDevice& device) const override;
  Result<cdi::ContainerEdits> Edits(const GpuDevice& device, const GpuContainerEdits& edits) const override {
    return edits.FullGpu(*device.gpu);
  }
  std::vector<std::string> Held(const GpuDevice& device) const override;

 private:
  bool Partitioned(const devices::GpuInfo& gpu) const;
  const bool partitionable_;
  const bool passthrough_;
};

}  // namespace nvdra::gpu
