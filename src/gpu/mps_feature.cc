// MPS control daemons (mps_strategy.h) as a plug-in of the GPU kind: the
// strategy's steps, the daemon's edits for each device it serves, what a
// daemon imported from the Go driver's checkpoint leaves out, and the sweep
// of daemons and directories no record owns.
#include <algorithm>

#include "gpu/feature_adapters.h"
#include "gpu/gpu_handlers.h"
#include "gpu/mps_config.h"
#include "gpu/mps_strategy.h"
#include "util/file_util.h"

namespace nvdra::gpu {

namespace {

class MpsFeature final : public SharingStrategyFeature {
 public:
  MpsFeature(const MpsRuntime& runtime, devices::GpuControl& control, const devices::NodeInventory& inventory,
             bool dynamic_mig)
      : SharingStrategyFeature(std::make_unique<MpsStrategy>(runtime, control, inventory), &Codec()),
        settings_(runtime.settings),
        sweeps_(runtime.api != nullptr),
        dynamic_mig_(dynamic_mig) {}

  Status Plan(const ClaimPlanning& claim, GpuUndo& undo, driver::ClaimPlan& plan) const override {
    // As upstream (unreachable while the gates exclude each other).
    for (const auto& group : claim.work().groups) {
      if (dynamic_mig_ && SharingStrategyOf(group.config) == kMpsStrategy) {
        return FailedPrecondition("MPS is not yet supported when using featureGates.DynamicMIG=true");
      }
    }
    return SharingStrategyFeature::Plan(claim, undo, plan);
  }

  // A daemon imported from the Go driver's checkpoint knows only its id: it
  // runs in this plugin's namespace, its files where upstream keeps them.
  void CompleteImported(GpuUndo& undo) const override {
    if (undo.Find<MpsUndo>() == nullptr) return;
    for (auto& d : undo.Get<MpsUndo>().daemons) {
      if (d.ns.empty()) d.ns = settings_.ns;
      if (d.root.empty()) d.root = JoinPath(JoinPath(settings_.plugin_dir, "mps"), d.id);
    }
  }

  // A device shared through an MPS daemon gets the daemon's edits too.
  Status AddEdits(const GpuUndo& undo, const GpuContainerEdits&, ClaimEditsDraft& draft) const override {
    for (auto& [device, edits] : draft.devices) {
      const std::string& uuid = device->uuid;
      for (const auto& daemon : undo.Of<MpsUndo>().daemons) {
        if (std::find(daemon.uuids.begin(), daemon.uuids.end(), uuid) != daemon.uuids.end()) {
          edits.Append(MpsContainerEdits(daemon));
        }
      }
    }
    return Status::Ok();
  }

  std::optional<FeatureSweep> sweep() const override {
    if (!sweeps_) return std::nullopt;
    return FeatureSweep{"MPS control daemon sweep", true, std::nullopt};
  }

  Result<int> SweepOrphans(const UndoRecords& records, bool) override {
    return static_cast<MpsStrategy&>(strategy()).SweepOrphans([&]() -> Result<std::vector<MpsDaemonUndo>> {
      NVDRA_ASSIGN_OR_RETURN(std::vector<HeldRecord> all, records());
      // Read leniently: an item this version cannot decode (a newer one's)
      // still owns the daemon it names.
      std::vector<MpsDaemonUndo> out;
      for (const auto& [r, origin] : all) {
        if (!r.is_object() || !r.contains(MpsUndo::kKey) || !r[MpsUndo::kKey].is_array()) continue;
        for (const auto& item : r[MpsUndo::kKey]) {
          if (!item.is_object()) continue;
          MpsDaemonUndo d;
          if (item.contains("deployment") && item["deployment"].is_string()) d.deployment = item["deployment"];
          if (item.contains("id") && item["id"].is_string()) d.id = item["id"];
          out.push_back(std::move(d));
        }
      }
      return out;
    });
  }

 private:
  static const UndoPieceCodec& Codec() {
    static const UndoPieceCodec codec = MpsUndoCodec();
    return codec;
  }
  const MpsSettings settings_;
  const bool sweeps_;
  const bool dynamic_mig_;
};

}  // namespace

std::unique_ptr<ClaimFeature> NewMpsFeature(const MpsRuntime& runtime, devices::GpuControl& control,
                                            const devices::NodeInventory& inventory, bool dynamic_mig) {
  return std::make_unique<MpsFeature>(runtime, control, inventory, dynamic_mig);
}

}  // namespace nvdra::gpu
