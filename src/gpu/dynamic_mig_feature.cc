// Dynamic MIG (dynamic_mig_type.h) as a plug-in of the GPU kind: the type's
// steps, and the sweep of MIG devices no record owns (the first pass also
// turns MIG mode off on GPUs left without MIG devices, as upstream at start).
#include "gpu/dynamic_mig_type.h"
#include "gpu/feature_adapters.h"
#include "gpu/gpu_handlers.h"

namespace nvdra::gpu {

namespace {

const UndoPieceCodec& MigPieceCodec() {
  static const UndoPieceCodec codec = MigUndoCodec();
  return codec;
}

class DynamicMigFeature final : public DeviceTypeFeature {
 public:
  DynamicMigFeature(devices::GpuControl* control, const devices::NodeInventory* inventory)
      : DeviceTypeFeature(std::make_unique<DynamicMigType>(control, inventory), &MigPieceCodec()) {}

  std::optional<FeatureSweep> sweep() const override { return FeatureSweep{"MIG device sweep", true, std::nullopt}; }

  Result<int> SweepOrphans(const UndoRecords& records, bool at_start) override {
    return static_cast<DynamicMigType&>(type()).SweepOrphans(
        [&]() -> Result<std::vector<GpuUndo>> {
          NVDRA_ASSIGN_OR_RETURN(std::vector<HeldRecord> all, records());
          // Read leniently: a record this version cannot decode still owns
          // what its readable MIG items name.
          std::vector<GpuUndo> out;
          for (const auto& [r, origin] : all) {
            if (!r.is_object() || !r.contains(MigUndo::kKey) || !r[MigUndo::kKey].is_array()) continue;
            const nlohmann::json piece = {{std::string(MigUndo::kKey), r[MigUndo::kKey]}};
            auto decoded = DecodeGpuUndo(piece, {MigPieceCodec()});
            if (decoded.ok()) out.push_back(std::move(decoded).value());
          }
          return out;
        },
        at_start);
  }
};

}  // namespace

std::unique_ptr<ClaimFeature> NewDynamicMigFeature(devices::GpuControl* control,
                                                   const devices::NodeInventory* inventory) {
  return std::make_unique<DynamicMigFeature>(control, inventory);
}

}  // namespace nvdra::gpu
