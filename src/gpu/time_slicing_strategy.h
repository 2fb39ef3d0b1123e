// Time-slicing (sharing.strategy TimeSlicing): a whole GPU's time slice set
// to the config's interval at Prepare and reset at Unprepare, through
// TimeSliceResets (bounded attempts, owed resets retried in the background).
// A partition of a GPU (GpuDevice::partition) cannot be time-sliced on its
// own: a config asking for it changes nothing, as upstream. A GPU another
// live claim still holds (DeviceSharedWithOthers) keeps its time slice at
// Unprepare: its sharers have the same sharing configuration, and the last
// one resets it.
#pragma once

#include "devices/device_info.h"
#include "gpu/sharing_strategy.h"
#include "gpu/time_slice_resets.h"
#include "gpu/time_slicing_undo.h"

namespace nvdra::gpu {

class TimeSlicingStrategy final : public SharingStrategy {
 public:
  // `inventory` says which GPU a recorded UUID is now (for the reset's
  // device name); both must outlive the strategy.
  // `shared_with_others`: null when devices are never shared.
  TimeSlicingStrategy(TimeSliceResets& resets, const devices::NodeInventory& inventory,
                      DeviceSharedWithOthers shared_with_others = nullptr)
      : resets_(resets), inventory_(inventory), shared_with_others_(std::move(shared_with_others)) {}

  std::string_view name() const override;
  Status Plan(const std::string& claim_uid, const config::ConfigGroup& group, const GpuDeviceLookup& devices,
              GpuUndo& undo) const override;
  Status Apply(const GpuUndo& undo) override;
  Status Undo(const std::string& claim_uid, const GpuUndo& undo) override;

 private:
  TimeSliceResets& resets_;
  const devices::NodeInventory& inventory_;
  const DeviceSharedWithOthers shared_with_others_;
};

}  // namespace nvdra::gpu
