// Whole GPUs: each GPU of the node that no plug-in withholds, published as
// gpu-<minor>, with GpuConfig; its containers get /dev/nvidia<minor> and its
// DRM nodes. What other plug-ins change about a whole GPU (whether it is
// published at all, what a claim on it holds besides it, how it is
// published) are their decorations, handed to the type where the plug-ins
// are registered (gpu_handlers.cc), so that this file knows none of them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gpu/gpu_device_type.h"

namespace nvdra::gpu {

// What another plug-in adds to the whole GPUs. Each hook is asked in the
// order the decorations were handed over.
class FullGpuDecoration {
 public:
  virtual ~FullGpuDecoration() = default;
  // Whether `gpu` is not published whole (its parts are, instead).
  virtual bool Withholds(const devices::GpuInfo& gpu) const { return false; }
  // Adds to `device` as the kind keeps it (its twin).
  virtual void Decorate(const devices::NodeInventory& inventory, GpuDevice& device) const {}
  // Adds to what a claim on `device` holds in the ledger.
  virtual void AddHeld(const GpuDevice& device, std::vector<std::string>& held) const {}
  // Adds to, or replaces, what the type published for `device`.
  virtual void Decorate(const GpuDevice& device, model::PublishedDevice& published) const {}
};
using FullGpuDecorations = std::vector<std::shared_ptr<const FullGpuDecoration>>;

class FullGpuType final : public GpuDeviceType {
 public:
  explicit FullGpuType(FullGpuDecorations decorations = {}) : decorations_(std::move(decorations)) {}
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
  const FullGpuDecorations decorations_;
};

}  // namespace nvdra::gpu
