// Consumable shares (consumable_shares.h) as a plug-in of the GPU kind: full
// GPUs and MIG devices published for sharing (a passthrough device may not
// be shared, as upstream), and the shares a claim takes handed to the
// ledger with its plan.
#include "gpu/claim_feature.h"
#include "gpu/consumable_shares.h"
#include "gpu/gpu_device_types.h"
#include "gpu/gpu_handlers.h"
#include "gpu/mig_edits.h"

namespace nvdra::gpu {

namespace {

class ConsumableSharesFeature final : public ClaimFeature {
 public:
  explicit ConsumableSharesFeature(const ConsumableShares& shares) : shares_(shares) {}

  std::string_view name() const override { return "consumable shares"; }

  void Decorate(const GpuDevice& device, model::PublishedDevice& published) const override {
    if (device.type->name() == kDeviceTypeGpu || device.type->name() == kDeviceTypeMig) {
      ApplyConsumableShares(published, shares_);
    }
  }

  Status Plan(const ClaimPlanning& claim, GpuUndo&, driver::ClaimPlan& plan) const override {
    NVDRA_ASSIGN_OR_RETURN(plan.shares,
                           PlanShares(claim.work(), [&](const std::string& name) { return claim.Published(name); }));
    return Status::Ok();
  }

 private:
  const ConsumableShares shares_;
};

}  // namespace

std::unique_ptr<ClaimFeature> NewConsumableSharesFeature(const ConsumableShares& shares) {
  return std::make_unique<ConsumableSharesFeature>(shares);
}

}  // namespace nvdra::gpu
