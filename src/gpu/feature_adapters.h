// A device type (gpu_device_type.h) and a sharing strategy
// (sharing_strategy.h) as plug-ins of the GPU kind (claim_feature.h). A
// device type serves its devices, plans for the claim's devices of its type
// and applies and undoes its node-side work; a strategy plans for the config
// groups that name it. A plug-in with more to do (its edits, its sweep)
// derives from these.
#pragma once

#include <memory>

#include "gpu/claim_feature.h"
#include "gpu/gpu_device_type.h"
#include "gpu/sharing_strategy.h"

namespace nvdra::gpu {

class DeviceTypeFeature : public ClaimFeature {
 public:
  // `piece`: the codec of the type's piece of the undo record (static), or null.
  explicit DeviceTypeFeature(std::unique_ptr<GpuDeviceType> type, const UndoPieceCodec* piece = nullptr)
      : type_(std::move(type)), piece_(piece) {}

  std::string_view name() const override { return type_->name(); }
  std::vector<GpuDevice> Devices(const devices::NodeInventory& inventory) const override {
    return type_->Devices(inventory);
  }
  void AddConfigRules(const config::FeatureGates& gates, config::DriverConfigRules& rules) const override;
  void AddMetricDeviceTypes(std::vector<std::string>& types) const override;
  const UndoPieceCodec* undo_piece() const override { return piece_; }
  Status Plan(const ClaimPlanning& claim, GpuUndo& undo, driver::ClaimPlan& plan) const override;
  Status Apply(const std::string& claim_uid, GpuUndo& undo) override { return type_->Apply(undo); }
  Status Undo(const std::string& claim_uid, const GpuUndo& undo) override { return type_->Undo(claim_uid, undo); }

 protected:
  // Whether `device` is one of this type's.
  bool Serves(const GpuDevice& device) const { return device.type == type_.get(); }
  GpuDeviceType& type() const { return *type_; }

 private:
  const std::unique_ptr<GpuDeviceType> type_;
  const UndoPieceCodec* const piece_;
};

class SharingStrategyFeature : public ClaimFeature {
 public:
  explicit SharingStrategyFeature(std::unique_ptr<SharingStrategy> strategy, const UndoPieceCodec* piece = nullptr)
      : strategy_(std::move(strategy)), piece_(piece) {}

  std::string_view name() const override { return strategy_->name(); }
  std::string_view sharing_strategy() const override { return strategy_->name(); }
  const UndoPieceCodec* undo_piece() const override { return piece_; }
  // SharingStrategy::Plan for each config group that names the strategy.
  Status Plan(const ClaimPlanning& claim, GpuUndo& undo, driver::ClaimPlan& plan) const override;
  Status Apply(const std::string& claim_uid, GpuUndo& undo) override { return strategy_->Apply(undo); }
  bool HasWait(const GpuUndo& undo) const override { return strategy_->HasWait(undo); }
  Status AwaitReady(const GpuUndo& undo, std::chrono::steady_clock::time_point deadline) override {
    return strategy_->AwaitReady(undo, deadline);
  }
  Status Undo(const std::string& claim_uid, const GpuUndo& undo) override { return strategy_->Undo(claim_uid, undo); }

 protected:
  SharingStrategy& strategy() const { return *strategy_; }

 private:
  const std::unique_ptr<SharingStrategy> strategy_;
  const UndoPieceCodec* const piece_;
};

}  // namespace nvdra::gpu
