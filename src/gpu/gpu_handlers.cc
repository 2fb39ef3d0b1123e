#include "gpu/gpu_handlers.h"

#include "gpu/dynamic_mig_type.h"
#include "gpu/full_gpu_type.h"
#include "gpu/mps_strategy.h"
#include "gpu/static_mig_type.h"
#include "gpu/time_slicing_strategy.h"
#include "gpu/vfio_type.h"

namespace nvdra::gpu {

std::vector<std::unique_ptr<GpuDeviceType>> RegisteredDeviceTypes(const config::FeatureGates& gates,
                                                                  const DeviceTypeContext& context) {
  std::vector<std::unique_ptr<GpuDeviceType>> t;
  const bool dynamic_mig = gates.Enabled(config::Gate::kDynamicMIG);
  if (dynamic_mig) {
    t.push_back(std::make_unique<DynamicMigType>(context.control, context.inventory));
  } else {
    t.push_back(std::make_unique<StaticMigType>());
  }
  const bool passthrough = gates.Enabled(config::Gate::kPassthroughSupport);
  t.push_back(std::make_unique<FullGpuType>(dynamic_mig, passthrough));
  if (passthrough) {
    t.push_back(std::make_unique<VfioType>(context.pci, context.iommufd_enabled,
                                           context.passthrough ? *context.passthrough : PassthroughHost{},
                                           context.control));
  }
  return t;
}

std::vector<std::unique_ptr<SharingStrategy>> RegisteredSharingStrategies(const SharingContext& context) {
  std::vector<std::unique_ptr<SharingStrategy>> s;
  s.push_back(std::make_unique<TimeSlicingStrategy>(context.resets, context.inventory, context.shared_with_others));
  s.push_back(std::make_unique<MpsStrategy>(context.mps, context.control, context.inventory));
  return s;
}

std::string SharingStrategyOf(const config::Config& config) {
  if (const auto* g = config.As<GpuConfig>()) return g->sharing ? g->sharing->strategy : "";
  if (const auto* m = config.As<MigDeviceConfig>()) return m->sharing ? m->sharing->strategy : "";
  return "";
}

}  // namespace nvdra::gpu
