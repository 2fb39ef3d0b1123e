#include "gpu/gpu_undo.h"

#include "util/json_reader.h"

namespace nvdra::gpu {

using nlohmann::json;

namespace {

constexpr const char* kWhat = "GPU undo record";

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

Status DecodeInto(const JsonReader& r, GpuUndo& out) {
  NVDRA_RETURN_IF_ERROR(r.ExpectObject());
  NVDRA_ASSIGN_OR_RETURN(out.version, r.OptionalOr<int64_t>("version", kGpuUndoVersion));
  NVDRA_ASSIGN_OR_RETURN(out.devices, r.OptionalOr<std::vector<std::string>>("devices", {}));
  NVDRA_RETURN_IF_ERROR(r.ForEach("timeSlicing", [&](const JsonReader& item) {
    if (auto t = DecodeTimeSlice(item)) {
      out.time_slicing.push_back(std::move(*t));
    } else {
      out.unreadable_time_slicing.push_back(item.value());
    }
    return Status::Ok();
  }));
  out.unknown = r.Unknown({"version", "devices", "timeSlicing"});
  return Status::Ok();
}

}  // namespace

json EncodeGpuUndo(const GpuUndo& undo) {
  json ts = json::array();
  for (const auto& t : undo.time_slicing) {
    json item = {{"device", t.device}, {"uuid", t.uuid}, {"interval", t.interval}};
    MergeUnknownMembers(item, t.unknown);
    ts.push_back(std::move(item));
  }
  for (const auto& raw : undo.unreadable_time_slicing) ts.push_back(raw);
  json j = {{"version", undo.version}, {"devices", undo.devices}, {"timeSlicing", std::move(ts)}};
  MergeUnknownMembers(j, undo.unknown);
  return j;
}

Result<GpuUndo> DecodeGpuUndo(const json& j) {
  GpuUndo out;
  if (j.is_null()) return out;
  NVDRA_RETURN_IF_ERROR(DecodeInto(JsonReader(j), out).Wrap(kWhat));
  return out;
}

}  // namespace nvdra::gpu
