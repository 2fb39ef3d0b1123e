#include "gpu/feature_adapters.h"

#include <algorithm>

namespace nvdra::gpu {

void DeviceTypeFeature::AddConfigRules(const config::FeatureGates& gates, config::DriverConfigRules& rules) const {
  rules.device_types.push_back({std::string(type_->name()), std::string(type_->config_kind())});
  if (auto d = type_->DefaultConfig(gates)) rules.defaults.push_back(std::move(*d));
}

void DeviceTypeFeature::AddMetricDeviceTypes(std::vector<std::string>& types) const {
  if (std::find(types.begin(), types.end(), type_->name()) == types.end()) types.emplace_back(type_->name());
}

Status DeviceTypeFeature::Plan(const ClaimPlanning& claim, GpuUndo& undo, driver::ClaimPlan&) const {
  std::vector<const GpuDevice*> devices = claim.DevicesOf(type_.get());
  if (devices.empty()) return Status::Ok();
  return type_->Plan(devices, undo);
}

Status SharingStrategyFeature::Plan(const ClaimPlanning& claim, GpuUndo& undo, driver::ClaimPlan&) const {
  for (const auto& group : claim.work().groups) {
    if (SharingStrategyOf(group.config) != strategy_->name()) continue;
    NVDRA_RETURN_IF_ERROR(strategy_->Plan(claim.work().uid, group, claim, undo));
  }
  return Status::Ok();
}

}  // namespace nvdra::gpu
