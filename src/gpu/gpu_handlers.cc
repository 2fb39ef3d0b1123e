#include "gpu/gpu_handlers.h"

#include "gpu/dynamic_mig_type.h"
#include "gpu/feature_adapters.h"
#include "gpu/full_gpu_type.h"
#include "gpu/gpu_device_types.h"
#include "gpu/mig_config.h"
#include "gpu/mps_strategy.h"
#include "gpu/static_mig_type.h"
#include "gpu/vfio_type.h"

namespace nvdra::gpu {

namespace {

// What the other plug-ins change about whole GPUs.
FullGpuDecorations WholeGpuDecorations(bool dynamic_mig, bool passthrough) {
  FullGpuDecorations out;
  out.push_back(dynamic_mig ? DynamicMigGpuDecoration() : StaticMigGpuDecoration());
  if (passthrough) out.push_back(PassthroughGpuDecoration());
  return out;
}

// The device types, in the order of RegisteredDeviceTypes. Dynamic MIG and
// passthrough are registered with their gate off too: a record still
// names what they created.
void AddDeviceTypes(const FeatureContext& c, FeatureList& out) {
  const bool dynamic_mig = c.gates.Enabled(config::Gate::kDynamicMIG);
  const bool passthrough = c.gates.Enabled(config::Gate::kPassthroughSupport);
  out.push_back({NewDynamicMigFeature(&c.control, &c.inventory), dynamic_mig});
  out.push_back({std::make_unique<DeviceTypeFeature>(std::make_unique<StaticMigType>()), !dynamic_mig});
  auto full = std::make_unique<FullGpuType>(WholeGpuDecorations(dynamic_mig, passthrough));
  out.push_back({std::make_unique<DeviceTypeFeature>(std::move(full)), true});
  out.push_back({NewPassthroughFeature(c, passthrough), passthrough});
}

}  // namespace

FeatureList RegisteredFeatures(const FeatureContext& c, std::vector<std::unique_ptr<GpuDeviceType>> types) {
  const GpuFeatureOptions& o = c.options;
  const bool shares = o.consumable_shares.enabled();
  const DeviceSharedWithOthers shared_with_others = shares ? o.shared_with_others : DeviceSharedWithOthers();
  FeatureList out;
  out.push_back({NewFabricFeature(o.fabric, shared_with_others),
                 c.gates.Enabled(config::Gate::kFabricManagerPartitioning)});
  if (types.empty()) {
    AddDeviceTypes(c, out);
  } else {
    for (auto& t : types) out.push_back({std::make_unique<DeviceTypeFeature>(std::move(t)), true});
  }
  out.push_back({NewTimeSlicingFeature(c, shared_with_others), true});
  out.push_back({NewMpsFeature(o.mps, c.control, c.inventory, c.gates.Enabled(config::Gate::kDynamicMIG)), true});
  out.push_back({NewConsumableSharesFeature(o.consumable_shares), shares});
  return out;
}

devices::NodeInventory InventoryForFeatures(devices::NodeInventory inventory, const config::FeatureGates& gates,
                                            const GpuFeatureOptions& options) {
  return WithGpusOnVfio(std::move(inventory), gates, options.pci);
}

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
  t.push_back(std::make_unique<FullGpuType>(WholeGpuDecorations(dynamic_mig, passthrough)));
  if (passthrough) {
    t.push_back(std::make_unique<VfioType>(context.pci, context.iommufd_enabled,
                                           context.passthrough ? *context.passthrough : PassthroughHost{},
                                           context.control));
  }
  return t;
}

config::DriverConfigRules GpuConfigRules(const config::FeatureGates& gates) {
  config::DriverConfigRules rules;
  rules.driver = kDriverName;
  for (const auto& type : RegisteredDeviceTypes(gates)) {
    rules.device_types.push_back({std::string(type->name()), std::string(type->config_kind())});
    if (auto d = type->DefaultConfig(gates)) rules.defaults.push_back(std::move(*d));
  }
  return rules;
}

const CheckpointPieces& BuiltinCheckpointPieces() {
  static const CheckpointPieces* pieces = new CheckpointPieces{MpsCheckpointPiece(), MigCheckpointPiece(),
                                                               ConsumableSharesCheckpointPiece()};
  return *pieces;
}

std::string SharingStrategyOf(const config::Config& config) {
  if (const auto* g = config.As<GpuConfig>()) return g->sharing ? g->sharing->strategy : "";
  if (const auto* m = config.As<MigDeviceConfig>()) return m->sharing ? m->sharing->strategy : "";
  return "";
}

}  // namespace nvdra::gpu
