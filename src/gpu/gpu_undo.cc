#include "gpu/gpu_undo.h"

#include <limits>

#include "driver/undo_record.h"

namespace nvdra::gpu {

using nlohmann::json;

namespace {

constexpr const char* kWhat = "GPU undo record";

// nullopt: an item this version cannot read.
std::optional<TimeSliceUndo> DecodeTimeSlice(const json& item) {
  auto f = driver::undo::Fields::Of(item, "timeSlicing item");
  if (!f.ok()) return std::nullopt;
  auto uuid = f->String("uuid");
  auto device = f->String("device");
  auto interval = f->Int("interval");
  if (!uuid.ok() || !uuid->has_value() || !device.ok() || !interval.ok()) return std::nullopt;
  // An interval outside int's range cannot be one this version wrote.
  if (interval->value_or(0) < std::numeric_limits<int>::min() ||
      interval->value_or(0) > std::numeric_limits<int>::max()) {
    return std::nullopt;
  }
  TimeSliceUndo t;
  t.uuid = **uuid;
  t.device = device->value_or("");
  t.interval = static_cast<int>(interval->value_or(0));
  t.unknown = f->Unknown({"device", "uuid", "interval"});
  return t;
}

}  // namespace

json EncodeGpuUndo(const GpuUndo& undo) {
  json ts = json::array();
  for (const auto& t : undo.time_slicing) {
    json item = {{"device", t.device}, {"uuid", t.uuid}, {"interval", t.interval}};
    driver::undo::MergeUnknown(item, t.unknown);
    ts.push_back(std::move(item));
  }
  for (const auto& raw : undo.unreadable_time_slicing) ts.push_back(raw);
  json j = {{"version", undo.version}, {"devices", undo.devices}, {"timeSlicing", std::move(ts)}};
  driver::undo::MergeUnknown(j, undo.unknown);
  return j;
}

Result<GpuUndo> DecodeGpuUndo(const json& j) {
  GpuUndo out;
  if (j.is_null()) return out;
  NVDRA_ASSIGN_OR_RETURN(auto f, driver::undo::Fields::Of(j, kWhat));
  NVDRA_ASSIGN_OR_RETURN(auto version, f.Int("version"));
  out.version = version.value_or(kGpuUndoVersion);
  NVDRA_ASSIGN_OR_RETURN(out.devices, f.Strings("devices"));
  NVDRA_ASSIGN_OR_RETURN(json ts, f.Array("timeSlicing"));
  for (const auto& item : ts) {
    auto t = DecodeTimeSlice(item);
    if (t) {
      out.time_slicing.push_back(std::move(*t));
    } else {
      out.unreadable_time_slicing.push_back(item);
    }
  }
  out.unknown = f.Unknown({"version", "devices", "timeSlicing"});
  return out;
}

}  // namespace nvdra::gpu
