// MPS (sharing.strategy MPS, gate MPSSupport): one MPS control daemon per
// claim and config group, as upstream runs it. Plan records the daemon (its
// id, Deployment, directories, the GPUs whose compute mode changes, its
// settings) in the undo record before anything exists. Apply creates
// <plugin dir>/mps/<id>/{shm,pipe,log}, mounts the shm tmpfs, sets the full
// GPUs to EXCLUSIVE_PROCESS and creates the Deployment from the template;
// each step is idempotent, so a retry, a crash or a reboot redoes only what
// is missing. AwaitReady waits (without the claim's locks) for upstream's
// readiness: one ready replica, one pod with one ready container. Undo
// deletes the Deployment (foreground), resets the compute mode to DEFAULT,
// unmounts the shm and removes the directory. The claim's containers get
// CUDA_MPS_PIPE_DIRECTORY and the pipe and shm mounts (GpuKind's edits).
#pragma once

#include <functional>
#include <memory>
#include <set>

#include "devices/device_info.h"
#include "devices/gpu_control.h"
#include "gpu/mps_daemon.h"
#include "gpu/mps_undo.h"
#include "gpu/sharing_strategy.h"

namespace nvdra::gpu {

// What MPS needs beyond the strategy; `api` and `mounter` unset: MPS is not
// set up (the MPSSupport gate is off) and an MPS claim is an error.
struct MpsRuntime {
  MpsSettings settings;
  std::shared_ptr<MpsDaemonApi> api;
  std::shared_ptr<ShmMounter> mounter;
  // Consumable shares are on: MPS is refused, as upstream does.
  bool consumable_shares = false;
  // How often readiness is checked: the first wait, doubled up to the cap.
  std::chrono::milliseconds first_poll{200};
  std::chrono::milliseconds max_poll{2'000};
};

class MpsStrategy final : public SharingStrategy {
 public:
  // `control` and `inventory` outlive the strategy.
  MpsStrategy(MpsRuntime runtime, devices::GpuControl& control, const devices::NodeInventory& inventory)
      : rt_(std::move(runtime)), control_(control), inventory_(inventory) {}

  std::string_view name() const override;
  Status Plan(const std::string& claim_uid, const config::ConfigGroup& group, const GpuDeviceLookup& devices,
              GpuUndo& undo) const override;
  Status Apply(const GpuUndo& undo) override;
  bool HasWait(const GpuUndo& undo) const override { return !undo.Of<MpsUndo>().daemons.empty(); }
  Status AwaitReady(const GpuUndo& undo, std::chrono::steady_clock::time_point deadline) override;
  Status Undo(const std::string& claim_uid, const GpuUndo& undo) override;

  // Deletes the daemons of this node (by label) and the directories under
  // <plugin dir>/mps that no record of `owned()` names: a daemon whose
  // claim's entry is gone. `owned` is asked after the listing, so a daemon
  // created meanwhile (its record is written first) is never taken for an
  // orphan. Returns how many daemons and directories were removed.
  Result<int> SweepOrphans(const std::function<Result<std::vector<MpsDaemonUndo>>()>& owned);

 private:
  Status ApplyOne(const MpsDaemonUndo& d);
  Status UndoOne(const std::string& claim_uid, const MpsDaemonUndo& d);
  Status RemoveDirectory(const std::string& root);

  MpsRuntime rt_;
  devices::GpuControl& control_;
  const devices::NodeInventory& inventory_;
};

// The edits a container of an MPS claim gets for `daemon`: upstream's
// CUDA_MPS_PIPE_DIRECTORY and the shm and pipe bind mounts.
cdi::ContainerEdits MpsContainerEdits(const MpsDaemonUndo& daemon);

}  // namespace nvdra::gpu
