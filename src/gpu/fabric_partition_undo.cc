#include "gpu/fabric_partition_undo.h"

namespace nvdra::gpu {

using nlohmann::json;

namespace {

std::optional<FabricPartitionUndo> DecodeFabricPartition(const JsonReader& item) {
  if (!item.value().is_object()) return std::nullopt;
  auto id = item.Required<int>("id");
  auto modules = item.OptionalOr<json>("gpuModuleIDs", json::array());
  if (!id.ok() || !modules.ok() || !modules->is_array()) return std::nullopt;
  FabricPartitionUndo f;
  f.id = *id;
  // A module id past int's range cannot be one this version wrote: the
  // item is kept verbatim instead of coming back as another number.
  for (const auto& m : *modules) {
    auto id_of = JsonAs<int>(m, "gpuModuleIDs");
    if (!id_of.ok()) return std::nullopt;
    f.module_ids.push_back(*id_of);
  }
  f.unknown = item.Unknown({"id", "gpuModuleIDs"});
  return f;
}

}  // namespace

json FabricUndo::Encode() const {
  json f = {{"id", partition.id}, {"gpuModuleIDs", partition.module_ids}};
  MergeUnknownMembers(f, partition.unknown);
  return f;
}

UndoPieceCodec FabricPartitionUndoCodec() {
  return {std::string(FabricUndo::kKey), 1, [](const JsonReader& value, int) -> Result<std::unique_ptr<UndoPiece>> {
            auto f = DecodeFabricPartition(value);
            if (!f) return std::unique_ptr<UndoPiece>();
            return std::unique_ptr<UndoPiece>(std::make_unique<FabricUndo>(std::move(*f)));
          }};
}

}  // namespace nvdra::gpu
