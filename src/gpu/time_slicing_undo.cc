#include "gpu/time_slicing_undo.h"

namespace nvdra::gpu {

using nlohmann::json;

namespace {

// nullopt: an item this version cannot read (not an object, no uuid, a field
// of the wrong type, an interval outside int's range, which cannot be one
// this version wrote).
std::optional<TimeSliceUndo> DecodeTimeSlice(const JsonReader& item) {
  auto uuid = item.Required<std::string>("uuid");
  auto device = item.OptionalOr<std::string>("device", "");
  auto interval = item.OptionalOr<int>("interval", 0);
  if (!uuid.ok() || !device.ok() || !interval.ok()) return std::nullopt;
  TimeSliceUndo t;
  t.uuid = *uuid;
  t.device = *device;
  t.interval = *interval;
  t.unknown = item.Unknown({"device", "uuid", "interval"});
  return t;
}

}  // namespace

json TimeSlicingUndo::Encode() const {
  return EncodeListPiece(items, unreadable, [](const TimeSliceUndo& t) {
    json item = {{"device", t.device}, {"uuid", t.uuid}, {"interval", t.interval}};
    MergeUnknownMembers(item, t.unknown);
    return item;
  });
}

UndoPieceCodec TimeSlicingUndoCodec() {
  return {std::string(TimeSlicingUndo::kKey), 1, [](const JsonReader& value, int) {
            return DecodeListPiece<TimeSlicingUndo>(value, /*lenient_shape=*/false, &TimeSlicingUndo::items,
                                                    &TimeSlicingUndo::unreadable, DecodeTimeSlice);
          }};
}

}  // namespace nvdra::gpu
