// Static MIG devices: the MIG devices that exist on MIG-enabled GPUs when
// the plugin starts (created by an operator or the MIG manager), published
// as gpu-<minor>-mig-<profile>-<gi profile>-<placement> with their
// capacities, with MigDeviceConfig; their containers get the parent GPU's
// edits plus the GI and CI capability nodes.
#pragma once

#include "gpu/gpu_device_type.h"

namespace nvdra::gpu {

class StaticMigType final : public GpuDeviceType {
 public:
  std::string_view name() const override;
  std::string_view config_kind() const override { return "MigDeviceConfig"; }
  std::optional<config::Config> DefaultConfig(const config::FeatureGates&) const override { return MigDeviceConfig{}; }
  std::vector<GpuDevice> Devices(const devices::NodeInventory& inventory) const override;
  model::PublishedDevice Publish(const GpuDevice& device) const override;
  Result<cdi::ContainerEdits> Edits(const GpuDevice& device, const GpuContainerEdits& edits) const override {
    return edits.Mig(*device.mig, device.gpu);
  }
};

}  // namespace nvdra::gpu
