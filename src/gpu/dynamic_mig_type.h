// Dynamic MIG devices (the DynamicMIG gate): every placement of every MIG
// profile of each GPU dynamic MIG serves (devices::DynamicMigCapable),
// published as gpu-<minor>-mig-<profile>-<gi profile>-<placement start>
// consuming the GPU's counters (mig_counters.h), with MigDeviceConfig. The
// MIG device is created at Prepare and destroyed at Unprepare:
//   Plan:  the parent, profile and placement in the undo record, before
//          anything exists (so a crash at any later step leaves a record
//          that finds what was created);
//   Apply: MIG mode on when it is off (as upstream), then the GPU instance
//          at the placement and its compute instance; one already at that
//          placement is taken (a retry after a crash);
//   Undo:  the MIG device at the recorded placement destroyed, then MIG mode
//          off when no MIG device is left and the GPU toggles it without a
//          reset (as upstream).
// SweepOrphans destroys MIG devices no undo record owns (a record lost with
// its claim, or devices left from before), and at start turns MIG mode off
// on GPUs without MIG devices that toggle it (as upstream).
#pragma once

#include <functional>

#include "devices/gpu_control.h"
#include "gpu/full_gpu_type.h"
#include "gpu/gpu_device_type.h"
#include "gpu/mig_config.h"
#include "gpu/mig_undo.h"

namespace nvdra::gpu {

// The profile and placement a dynamic MIG device would be created at
// (GpuDevice::detail).
struct DynamicMigPlacement final : GpuDeviceDetail {
  DynamicMigPlacement(const devices::MigProfileInfo& p, const devices::MigPlacement& pl) : profile(p), placement(pl) {}
  const devices::MigProfileInfo& profile;
  const devices::MigPlacement& placement;
};

class DynamicMigType final : public GpuDeviceType {
 public:
  // `control` and `inventory` outlive the type; null in a type asked only
  // for its name and config (GpuConfigRules).
  DynamicMigType(devices::GpuControl* control, const devices::NodeInventory* inventory)
      : control_(control), inventory_(inventory) {}

  std::string_view name() const override;
  std::string_view config_kind() const override { return "MigDeviceConfig"; }
  std::optional<config::Config> DefaultConfig(const config::FeatureGates&) const override { return MigDeviceConfig{}; }
  std::vector<GpuDevice> Devices(const devices::NodeInventory& inventory) const override;
  model::PublishedDevice Publish(const GpuDevice& device) const override;
  std::vector<std::string> Held(const GpuDevice& device) const override;
  Result<cdi::ContainerEdits> Edits(const GpuDevice& device, const GpuContainerEdits& edits) const override;
  Result<cdi::ContainerEdits> Edits(const GpuDevice& device, const GpuUndo& undo,
                                    const GpuContainerEdits& edits) const override;

  Status Plan(const std::vector<const GpuDevice*>& devices, GpuUndo& undo) const override;
  Status Apply(GpuUndo& undo) override;
  Status Undo(const std::string& claim_uid, const GpuUndo& undo) override;

  // Destroys the MIG devices on this node's dynamic MIG GPUs that no undo
  // record of `undo_records()` (read after the listing) names by placement.
  // With `disable_idle_mig_mode` (the pass at start, as upstream's), a GPU
  // that toggles MIG mode without a reset, has no MIG device left and no
  // record naming it leaves MIG mode. Returns how many were destroyed.
  using UndoRecords = std::function<Result<std::vector<GpuUndo>>()>;
  Result<int> SweepOrphans(const UndoRecords& undo_records, bool disable_idle_mig_mode = false);

 private:
  Status ApplyOne(MigDeviceUndo& mig);
  Status UndoOne(const MigDeviceUndo& mig);
  const devices::GpuInfo* Gpu(const std::string& uuid) const;

  Status CheckWired() const;
  devices::GpuControl* control_;
  const devices::NodeInventory* inventory_;
};

// What dynamic MIG changes about whole GPUs: a GPU it serves is published
// as upstream does, whatever its MIG mode when that toggles without a
// reset, with the largest MIG capacities, consuming all of its counter
// set, and a claim on it holds all of its memory slices; any other GPU in
// MIG mode is not published whole.
std::shared_ptr<const FullGpuDecoration> DynamicMigGpuDecoration();

}  // namespace nvdra::gpu
