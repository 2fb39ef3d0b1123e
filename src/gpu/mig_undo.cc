#include "gpu/mig_undo.h"

namespace nvdra::gpu {

using nlohmann::json;

namespace {

std::optional<MigDeviceUndo> DecodeMig(const JsonReader& item) {
  MigDeviceUndo m;
  auto device = item.Required<std::string>("device");
  auto parent = item.Required<std::string>("parentUUID");
  auto minor = item.Required<int>("parentMinor");
  auto profile = item.OptionalOr<std::string>("profile", "");
  auto gip = item.Required<int>("giProfileId");
  auto cip = item.Required<int>("ciProfileId");
  auto start = item.Required<int>("placementStart");
  auto size = item.Required<int>("placementSize");
  auto gi = item.Optional<int>("giId");
  auto ci = item.Optional<int>("ciId");
  auto uuid = item.OptionalOr<std::string>("uuid", "");
  if (!device.ok() || !parent.ok() || !minor.ok() || !profile.ok() || !gip.ok() || !cip.ok() || !start.ok() ||
      !size.ok() || !gi.ok() || !ci.ok() || !uuid.ok()) {
    return std::nullopt;
  }
  m.device = *device;
  m.parent_uuid = *parent;
  m.parent_minor = *minor;
  m.profile = *profile;
  m.gi_profile_id = *gip;
  m.ci_profile_id = *cip;
  m.placement_start = *start;
  m.placement_size = *size;
  m.gi_id = *gi;
  m.ci_id = *ci;
  m.uuid = *uuid;
  m.unknown = item.Unknown({"device", "parentUUID", "parentMinor", "profile", "giProfileId", "ciProfileId",
                            "placementStart", "placementSize", "giId", "ciId", "uuid"});
  return m;
}

json EncodeMig(const MigDeviceUndo& m) {
  json item = {{"device", m.device},
               {"parentUUID", m.parent_uuid},
               {"parentMinor", m.parent_minor},
               {"profile", m.profile},
               {"giProfileId", m.gi_profile_id},
               {"ciProfileId", m.ci_profile_id},
               {"placementStart", m.placement_start},
               {"placementSize", m.placement_size}};
  if (m.gi_id) item["giId"] = *m.gi_id;
  if (m.ci_id) item["ciId"] = *m.ci_id;
  if (!m.uuid.empty()) item["uuid"] = m.uuid;
  MergeUnknownMembers(item, m.unknown);
  return item;
}

}  // namespace

json MigUndo::Encode() const { return EncodeListPiece(devices, unreadable, EncodeMig); }

UndoPieceCodec MigUndoCodec() {
  return {std::string(MigUndo::kKey), 1, [](const JsonReader& value, int) {
            return DecodeListPiece<MigUndo>(value, /*lenient_shape=*/true, &MigUndo::devices, &MigUndo::unreadable,
                                            DecodeMig);
          }};
}

}  // namespace nvdra::gpu
