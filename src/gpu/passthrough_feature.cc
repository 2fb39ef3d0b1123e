// VFIO passthrough (vfio_type.h) as a plug-in of the GPU kind: the type's
// steps; the claim's VfioDeviceConfig recorded with its devices (Unprepare
// and a repeated Prepare read only the record); the VFIO claim-wide edits in
// place of the driver's, as upstream; the device metadata of passthrough
// devices; and the sweep of GPUs left on vfio-pci by no record.
#include "gpu/feature_adapters.h"
#include "gpu/gpu_handlers.h"
#include "gpu/vfio_config.h"
#include "gpu/vfio_edits.h"
#include "gpu/vfio_type.h"
#include "util/log.h"

namespace nvdra::gpu {

namespace {

const UndoPieceCodec& PassthroughPieceCodec() {
  static const UndoPieceCodec codec = VfioUndoCodec();
  return codec;
}

class PassthroughFeature final : public DeviceTypeFeature {
 public:
  PassthroughFeature(std::unique_ptr<VfioType> type, const devices::NodeInventory& inventory, bool sweeps)
      : DeviceTypeFeature(std::move(type), &PassthroughPieceCodec()), inventory_(inventory), sweeps_(sweeps) {}

  bool PublishesMetadata(const GpuDevice& device) const override { return Serves(device); }

  Status Plan(const ClaimPlanning& claim, GpuUndo& undo, driver::ClaimPlan& plan) const override {
    NVDRA_RETURN_IF_ERROR(DeviceTypeFeature::Plan(claim, undo, plan));
    const driver::ClaimWork& work = claim.work();
    int vfio_groups = 0;
    for (const auto& group : work.groups) {
      const auto* v = group.config.As<VfioDeviceConfig>();
      if (v == nullptr) continue;
      ++vfio_groups;
      for (const auto& r : group.results) {
        for (auto& item : undo.Get<PassthroughUndo>().gpus) {
          if (item.device != r.device) continue;
          item.prefer_iommufd = v->iommu && v->iommu->backend_policy == kIommuPreferIommuFD;
          item.enable_api_device = v->iommu && v->iommu->enable_api_device.value_or(false);
        }
      }
    }
    if (vfio_groups > 1) {
      return InvalidArgument("claim " + work.ns + "/" + work.name + ":" + work.uid + " contains " +
                             std::to_string(vfio_groups) +
                             " VFIO device groups, but at most one is supported per claim");
    }
    return Status::Ok();
  }

  // A passthrough claim's containers get the VFIO edits instead of the
  // driver's, as upstream.
  Status AddEdits(const GpuUndo& undo, const GpuContainerEdits& edits, ClaimEditsDraft& draft) const override {
    const auto& gpus = undo.Of<PassthroughUndo>().gpus;
    if (gpus.empty()) return Status::Ok();
    bool api_device = false, iommufd = false;
    for (const auto& v : gpus) {
      api_device = api_device || v.enable_api_device;
      iommufd = iommufd || v.prefer_iommufd;
    }
    NVDRA_ASSIGN_OR_RETURN(draft.common, VfioCommonEdits(edits, api_device, iommufd && edits.IommuFdEnabled()));
    return Status::Ok();
  }

  std::optional<FeatureSweep> sweep() const override {
    if (!sweeps_) return std::nullopt;
    return FeatureSweep{"passthrough GPU sweep", true, std::nullopt};
  }

  Result<int> SweepOrphans(const UndoRecords& records, bool) override {
    return static_cast<VfioType&>(type()).SweepOrphans(inventory_, [&]() -> Result<std::vector<GpuUndo>> {
      NVDRA_ASSIGN_OR_RETURN(std::vector<HeldRecord> all, records());
      // Read leniently: a record this version cannot decode still owns what
      // its readable vfio items name.
      std::vector<GpuUndo> out;
      for (const auto& [r, origin] : all) {
        if (!r.is_object() || !r.contains(PassthroughUndo::kKey) || !r[PassthroughUndo::kKey].is_array()) continue;
        const nlohmann::json piece = {{std::string(PassthroughUndo::kKey), r[PassthroughUndo::kKey]}};
        auto decoded = DecodeGpuUndo(piece, {PassthroughPieceCodec()});
        if (decoded.ok()) out.push_back(std::move(decoded).value());
      }
      return out;
    });
  }

 private:
  const devices::NodeInventory& inventory_;
  const bool sweeps_;
};

}  // namespace

std::unique_ptr<ClaimFeature> NewPassthroughFeature(const FeatureContext& ctx, bool enabled) {
  // Off, it only binds back what a record names: without persistence mode
  // or the host's settings.
  auto type = enabled ? std::make_unique<VfioType>(ctx.options.pci, ctx.iommufd_enabled, ctx.options.passthrough,
                                                   &ctx.control)
                      : std::make_unique<VfioType>(ctx.options.pci, false);
  return std::make_unique<PassthroughFeature>(std::move(type), ctx.inventory, enabled);
}

devices::NodeInventory WithGpusOnVfio(devices::NodeInventory inventory, const config::FeatureGates& gates,
                                      devices::PciDriverControl* pci) {
  if (gates.Enabled(config::Gate::kPassthroughSupport) && pci != nullptr) {
    Status s = VfioType::AddGpusOnVfio(*pci, inventory);
    if (!s.ok()) NVDRA_WARN("looking for GPUs bound to vfio-pci: {}", s.ToString());
  }
  return inventory;
}

}  // namespace nvdra::gpu
