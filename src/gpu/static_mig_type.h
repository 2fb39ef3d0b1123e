// Static MIG devices: the MIG devices that exist on MIG-enabled GPUs when
// the plugin starts (created by an operator or the MIG manager), published
// as gpu-<minor>-mig-<profile>-<gi profile>-<placement> with their
// capacities, with MigDeviceConfig; their containers get the parent GPU's
// edits plus the GI and CI capability nodes.
#pragma once

#include "gpu/full_gpu_type.h"
#include "gpu/gpu_device_type.h"
#include "gpu/mig_config.h"
#include "gpu/mig_edits.h"

namespace nvdra::gpu {

// The MIG device a static MIG device is (GpuDevice::detail).
struct StaticMigDevice final : GpuDeviceDetail {
  explicit StaticMigDevice(const devices::MigDeviceInfo& m) : mig(m) {}
  const devices::MigDeviceInfo& mig;
};

class StaticMigType final : public GpuDeviceType {
 public:
  std::string_view name() const override;
  std::string_view config_kind() const override { return "MigDeviceConfig"; }
  std::optional<config::Config> DefaultConfig(const config::FeatureGates&) const override { return MigDeviceConfig{}; }
  std::vector<GpuDevice> Devices(const devices::NodeInventory& inventory) const override;
  model::PublishedDevice Publish(const GpuDevice& device) const override;
  Result<cdi::ContainerEdits> Edits(const GpuDevice& device, const GpuContainerEdits& edits) const override {
    return MigEdits(edits, DetailOf<StaticMigDevice>(device).mig, device.gpu);
  }
};

// What static MIG changes about whole GPUs: a GPU in MIG mode is published
// only as its MIG devices.
std::shared_ptr<const FullGpuDecoration> StaticMigGpuDecoration();

}  // namespace nvdra::gpu
