#include "gpu/mps_undo.h"

namespace nvdra::gpu {

using nlohmann::json;

namespace {

std::optional<MpsDaemonUndo> DecodeMps(const JsonReader& item) {
  MpsDaemonUndo m;
  auto id = item.Required<std::string>("id");
  auto ns = item.Required<std::string>("namespace");
  auto deployment = item.Required<std::string>("deployment");
  auto root = item.Required<std::string>("root");
  auto uuids = item.OptionalOr<std::vector<std::string>>("uuids", {});
  auto exclusive = item.OptionalOr<std::vector<std::string>>("exclusiveProcess", {});
  auto threads = item.Optional<int64_t>("activeThreadPercentage");
  auto limits = item.OptionalOr<json>("pinnedLimits", json::object());
  auto multi = item.OptionalOr<bool>("multiUser", false);
  if (!id.ok() || !ns.ok() || !deployment.ok() || !root.ok() || !uuids.ok() || !exclusive.ok() || !threads.ok() ||
      !limits.ok() || !multi.ok()) {
    return std::nullopt;
  }
  m.id = *id;
  m.ns = *ns;
  m.deployment = *deployment;
  m.root = *root;
  m.uuids = *uuids;
  m.exclusive_process = *exclusive;
  m.active_thread_percentage = *threads;
  if (!limits->is_object()) return std::nullopt;
  for (const auto& [uuid, limit] : limits->items()) {
    if (!limit.is_string()) return std::nullopt;
    m.pinned_limits[uuid] = limit.get<std::string>();
  }
  m.multi_user = *multi;
  m.unknown = item.Unknown({"id", "namespace", "deployment", "root", "uuids", "exclusiveProcess",
                            "activeThreadPercentage", "pinnedLimits", "multiUser"});
  return m;
}

json EncodeMps(const MpsDaemonUndo& m) {
  json item = {{"id", m.id},
               {"namespace", m.ns},
               {"deployment", m.deployment},
               {"root", m.root},
               {"uuids", m.uuids},
               {"exclusiveProcess", m.exclusive_process},
               {"multiUser", m.multi_user},
               {"pinnedLimits", m.pinned_limits}};
  if (m.active_thread_percentage) item["activeThreadPercentage"] = *m.active_thread_percentage;
  MergeUnknownMembers(item, m.unknown);
  return item;
}

}  // namespace

json MpsUndo::Encode() const { return EncodeListPiece(daemons, unreadable, EncodeMps); }

UndoPieceCodec MpsUndoCodec() {
  return {std::string(MpsUndo::kKey), 1, [](const JsonReader& value, int) {
            return DecodeListPiece<MpsUndo>(value, /*lenient_shape=*/true, &MpsUndo::daemons, &MpsUndo::unreadable,
                                            DecodeMps);
          }};
}

}  // namespace nvdra::gpu
