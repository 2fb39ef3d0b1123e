#include "gpu/vfio_undo.h"

namespace nvdra::gpu {

using nlohmann::json;

namespace {

std::optional<VfioUndo> DecodeVfio(const JsonReader& item) {
  VfioUndo v;
  auto device = item.Required<std::string>("device");
  auto bus = item.Required<std::string>("pciBusID");
  auto group = item.Optional<int>("iommuGroup");
  auto fd = item.OptionalOr<bool>("preferIommuFD", false);
  auto api = item.OptionalOr<bool>("enableAPIDevice", false);
  auto uuid = item.OptionalOr<std::string>("gpuUUID", "");
  auto minor = item.Optional<int>("gpuMinor");
  auto persistence = item.OptionalOr<bool>("restorePersistenceMode", false);
  if (!device.ok() || !bus.ok() || !group.ok() || !fd.ok() || !api.ok() || bus->empty()) return std::nullopt;
  if (!uuid.ok() || !minor.ok() || !persistence.ok()) return std::nullopt;
  v.gpu_uuid = *uuid;
  v.gpu_minor = *minor;
  v.restore_persistence = *persistence;
  v.device = *device;
  v.pci_bus_id = *bus;
  v.iommu_group = *group;
  v.prefer_iommufd = *fd;
  v.enable_api_device = *api;
  v.unknown = item.Unknown({"device", "pciBusID", "iommuGroup", "preferIommuFD", "enableAPIDevice", "gpuUUID",
                            "gpuMinor", "restorePersistenceMode"});
  return v;
}

json EncodeVfio(const VfioUndo& v) {
  json item = {{"device", v.device},
               {"pciBusID", v.pci_bus_id},
               {"preferIommuFD", v.prefer_iommufd},
               {"enableAPIDevice", v.enable_api_device}};
  if (v.iommu_group) item["iommuGroup"] = *v.iommu_group;
  if (!v.gpu_uuid.empty()) item["gpuUUID"] = v.gpu_uuid;
  if (v.gpu_minor) item["gpuMinor"] = *v.gpu_minor;
  if (v.restore_persistence) item["restorePersistenceMode"] = true;
  MergeUnknownMembers(item, v.unknown);
  return item;
}

}  // namespace

json PassthroughUndo::Encode() const { return EncodeListPiece(gpus, unreadable, EncodeVfio); }

UndoPieceCodec VfioUndoCodec() {
  return {std::string(PassthroughUndo::kKey), 1, [](const JsonReader& value, int) {
            return DecodeListPiece<PassthroughUndo>(value, /*lenient_shape=*/true, &PassthroughUndo::gpus,
                                                    &PassthroughUndo::unreadable, DecodeVfio);
          }};
}

}  // namespace nvdra::gpu
