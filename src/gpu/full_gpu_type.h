// Full GPUs: each GPU whose MIG mode is off, published as gpu-<minor>, with
// GpuConfig; its containers get /dev/nvidia<minor> and its DRM nodes.
#pragma once

#include "gpu/gpu_device_type.h"

namespace nvdra::gpu {

class FullGpuType final : public GpuDeviceType {
 public:
  std::string_view name() const override;
  std::string_view config_kind() const override { return "GpuConfig"; }
  std::optional<config::Config> DefaultConfig(const config::FeatureGates&) const override {
    return config::GpuConfig{};
  }
  std::vector<GpuDevice> Devices(const devices::NodeInventory& inventory) const override;
  model::PublishedDevice Publish(const GpuDevice& device) const override;
  Result<cdi::ContainerEdits> Edits(const GpuDevice& device, const GpuContainerEdits& edits) const override {
    return edits.FullGpu(*device.gpu);
  }
};

}  // namespace nvdra::gpu
