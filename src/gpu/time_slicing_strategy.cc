#include "gpu/time_slicing_strategy.h"

#include <algorithm>

#include "devices/device_names.h"
#include "gpu/time_slicing_config.h"
#include "util/log.h"

namespace nvdra::gpu {

std::string_view TimeSlicingStrategy::name() const { return kTimeSlicingStrategy; }

Status TimeSlicingStrategy::Plan(const std::string&, const config::ConfigGroup& group, const GpuDeviceLookup& devices,
                                 GpuUndo& undo) const {
  const auto* gc = group.config.As<GpuConfig>();
  if (gc == nullptr) return Status::Ok();  // a partition's config kind: nothing to program
  auto interval = TimeSliceOf(*gc);
  if (!interval) return Status::Ok();
  for (const auto& r : group.results) {
    const GpuDevice* d = devices.Find(r.device);
    if (d == nullptr || d->partition) continue;
    undo.Get<TimeSlicingUndo>().items.push_back({r.device, d->gpu->uuid, static_cast<int>(*interval),
                                                 nlohmann::json::object()});
  }
  return Status::Ok();
}

Status TimeSlicingStrategy::Apply(const GpuUndo& undo) {
  for (const auto& ts : undo.Of<TimeSlicingUndo>().items) {
    NVDRA_RETURN_IF_ERROR(resets_.Apply(ts.device, ts.uuid, ts.interval).Wrap("error applying config"));
  }
  return Status::Ok();
}

Status TimeSlicingStrategy::Undo(const std::string& claim_uid, const GpuUndo& undo) {
  for (const auto& item : undo.Of<TimeSlicingUndo>().unreadable) {
    NVDRA_WARN("claim {}: skipping an undo item this version does not understand: {}", claim_uid, item.dump());
  }
  // Every GPU's reset is tried, so each one's attempts count, even when an
  // earlier one failed.
  Status first;
  for (const auto& ts : undo.Of<TimeSlicingUndo>().items) {
    auto gpu = std::find_if(inventory_.gpus.begin(), inventory_.gpus.end(),
                            [&](const devices::GpuInfo& g) { return g.uuid == ts.uuid; });
    if (gpu == inventory_.gpus.end()) {
      NVDRA_WARN("claim {}: GPU {} is gone; nothing to reset", claim_uid, ts.uuid);
      continue;
    }
    if (shared_with_others_ && shared_with_others_(ts.device, claim_uid)) {
      NVDRA_VLOG(4, "Unprepare of claim {}: GPU {} still in use by other claims, skipping time-slice reset", claim_uid,
                 ts.uuid);
      continue;
    }
    Status s = resets_.ResetForClaim(claim_uid, devices::GpuDeviceName(gpu->minor), ts.uuid);
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

}  // namespace nvdra::gpu
