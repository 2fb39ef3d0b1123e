// MPS (sharing.strategy MPS): a validated MPS config (the MPSSupport gate
// on) is refused at Plan, naming the requests it applies to, until the MPS
// control daemon lands in this strategy; nothing durable is written for
// such a claim.
#pragma once

#include "gpu/sharing_strategy.h"

namespace nvdra::gpu {

class MpsStrategy final : public SharingStrategy {
 public:
  std::string_view name() const override;
  Status Plan(const config::ConfigGroup& group, const GpuDeviceLookup& devices, GpuUndo& undo) const override;
  // Plan refuses every MPS claim, so no record carries MPS work yet.
  Status Apply(const GpuUndo&) override { return Status::Ok(); }
  Status Undo(const std::string&, const GpuUndo&) override { return Status::Ok(); }
};

}  // namespace nvdra::gpu
