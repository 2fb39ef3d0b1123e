// Fabric Manager partitions (fabric_partitions.h) as a plug-in of the GPU
// kind: the attributes of full and passthrough GPUs, the partition of the
// claim's GPUs planned and activated before anything else and deactivated
// last, and the sweep of active partitions no record names.
#include <algorithm>

#include "gpu/claim_feature.h"
#include "gpu/fabric_partitions.h"
#include "gpu/gpu_device_types.h"
#include "gpu/gpu_handlers.h"
#include "gpu/vfio_edits.h"
#include "util/json_reader.h"
#include "util/log.h"

namespace nvdra::gpu {

namespace {

const UndoPieceCodec& FabricPieceCodec() {
  static const UndoPieceCodec codec = FabricPartitionUndoCodec();
  return codec;
}

bool FullOrPassthrough(const GpuDevice& d) {
  return d.type->name() == kDeviceTypeGpu || d.type->name() == kDeviceTypeVfio;
}

class FabricFeature final : public ClaimFeature {
 public:
  // `fabric` null: the node has no fabric that needs partitions.
  // `shared_with_others`: null unless consumable shares are on.
  FabricFeature(std::shared_ptr<FabricPartitions> fabric, DeviceSharedWithOthers shared_with_others)
      : fabric_(std::move(fabric)), shared_with_others_(std::move(shared_with_others)) {}

  std::string_view name() const override { return "Fabric Manager partitions"; }
  const UndoPieceCodec* undo_piece() const override { return &FabricPieceCodec(); }

  // Full and passthrough GPUs carry their Fabric Manager attributes, as upstream.
  void Decorate(const GpuDevice& device, model::PublishedDevice& published) const override {
    if (!FullOrPassthrough(device)) return;
    if (fabric_ != nullptr) {
      fabric_->PutAttributes(*device.gpu, published);
    } else {
      PutModuleIdAttribute(*device.gpu, published);
    }
  }

  // The physical GPUs of the claim's full and passthrough devices, each
  // once, in the claim's order; an admin-access result holds nothing, so it
  // neither activates nor releases a partition.
  Status Plan(const ClaimPlanning& claim, GpuUndo& undo, driver::ClaimPlan&) const override {
    if (fabric_ == nullptr) return Status::Ok();
    std::vector<const devices::GpuInfo*> gpus;
    for (const auto& r : claim.work().results) {
      const GpuDevice* d = r.admin_access ? nullptr : claim.Find(r.device);
      if (d == nullptr || !FullOrPassthrough(*d)) continue;
      if (std::find(gpus.begin(), gpus.end(), d->gpu) == gpus.end()) gpus.push_back(d->gpu);
    }
    if (gpus.empty()) return Status::Ok();
    NVDRA_ASSIGN_OR_RETURN(FabricPartitionUndo partition, fabric_->Match(gpus));
    undo.Get<FabricUndo>().partition = std::move(partition);
    return Status::Ok();
  }

  Status Apply(const std::string& claim_uid, GpuUndo& undo) override {
    const FabricUndo* f = undo.Find<FabricUndo>();
    if (f == nullptr) return Status::Ok();
    if (fabric_ == nullptr) {
      return FailedPrecondition("the claim's record names Fabric Manager partition " + std::to_string(f->partition.id) +
                                ", but this plugin runs without FabricManagerPartitioning");
    }
    return fabric_->Activate(claim_uid, f->partition);
  }

  Status Undo(const std::string& claim_uid, const GpuUndo& undo) override;

  std::optional<FeatureSweep> sweep() const override {
    if (fabric_ == nullptr) return std::nullopt;
    return FeatureSweep{"Fabric Manager partition sweep", true, std::nullopt};
  }
  Result<int> SweepOrphans(const UndoRecords& records, bool) override;

 private:
  const std::shared_ptr<FabricPartitions> fabric_;
  const DeviceSharedWithOthers shared_with_others_;
};

Status FabricFeature::Undo(const std::string& claim_uid, const GpuUndo& undo) {
  const FabricUndo* f = undo.Find<FabricUndo>();
  if (f == nullptr) return Status::Ok();
  const int id = f->partition.id;
  if (fabric_ == nullptr) {
    NVDRA_WARN("claim {}: Fabric Manager partition {} is left as it is: this plugin runs without "
               "FabricManagerPartitioning",
               claim_uid, id);
    return Status::Ok();
  }
  // With consumable shares, a claim still sharing these GPUs keeps their fabric.
  if (shared_with_others_) {
    for (const auto& device : undo.devices) {
      if (shared_with_others_(device, claim_uid)) {
        NVDRA_VLOG(4, "claim {}: GPU {} still in use by other claims, skipping partition {} deactivation", claim_uid,
                   device, id);
        return Status::Ok();
      }
    }
  }
  return fabric_->Deactivate(claim_uid, f->partition);
}

Result<int> FabricFeature::SweepOrphans(const UndoRecords& records, bool) {
  if (fabric_ == nullptr) return 0;
  return fabric_->SweepOrphans([&]() -> Result<FabricPartitions::Owners> {
    NVDRA_ASSIGN_OR_RETURN(std::vector<HeldRecord> all, records());
    // Read leniently: a record this version cannot decode still owns the
    // partition it names. One imported from the Go driver's checkpoint, or
    // rebuilt from a CDI spec, may hold a partition it does not name (a
    // tombstone's record is null: it holds nothing).
    const std::string key(FabricUndo::kKey);
    FabricPartitions::Owners owners;
    for (const auto& [r, origin] : all) {
      if (!r.is_object()) continue;
      const bool foreign = origin != ledger::ClaimOrigin::kPrepare;
      if (foreign && !r.contains(key)) owners.unknown = true;
      if (!r.contains(key)) continue;
      const auto& f = r[key];
      auto id = f.is_object() && f.contains("id") ? JsonAs<int>(f["id"], "id") : Result<int>(InvalidArgument("no id"));
      if (id.ok()) owners.ids.insert(*id);
    }
    return owners;
  });
}

}  // namespace

std::unique_ptr<ClaimFeature> NewFabricFeature(std::shared_ptr<FabricPartitions> fabric,
                                               DeviceSharedWithOthers shared_with_others) {
  return std::make_unique<FabricFeature>(std::move(fabric), std::move(shared_with_others));
}

}  // namespace nvdra::gpu
