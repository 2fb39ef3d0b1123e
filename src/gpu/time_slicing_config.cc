#include "gpu/time_slicing_config.h"

namespace nvdra::gpu {
namespace {

using config::ConfigWalker;
using config::JsonValue;

void Decode(ConfigWalker& w, const JsonValue& v, TimeSlicingConfig& c) {
  w.Struct(v, "TimeSlicingConfig", {{"interval", [&](const JsonValue& z) {
                                       config::fields::OptString(w, z, c.interval, "v1beta1.TimeSliceInterval");
                                     }}});
}

// Upstream fills only a missing timeSlicingConfig and then dereferences the
// nil interval of `timeSlicingConfig: {}` (a crash). An empty block asks
// for the same as none.
void FillDefaults(TimeSlicingConfig& c) {
  if (!c.interval) c.interval = std::string(TimeSliceIntervalName(TimeSliceInterval::kDefault));
}

// Normalize turns a missing interval into "Default"; an un-normalized
// config without one means the same.
Status Validate(const TimeSlicingConfig& c) {
  if (!c.interval || ParseTimeSliceInterval(*c.interval)) return Status::Ok();
  return InvalidArgument("unknown time-slice interval: " + *c.interval +
                         ", supported time-slice intervals: Default, Short, Medium, Long");
}

void Write(const TimeSlicingConfig& c, nlohmann::ordered_json& j) {
  if (c.interval) j["interval"] = *c.interval;
}

}  // namespace

std::optional<TimeSliceInterval> ParseTimeSliceInterval(std::string_view name) {
  if (name == "Default") return TimeSliceInterval::kDefault;
  if (name == "Short") return TimeSliceInterval::kShort;
  if (name == "Medium") return TimeSliceInterval::kMedium;
  if (name == "Long") return TimeSliceInterval::kLong;
  return std::nullopt;
}

std::string_view TimeSliceIntervalName(TimeSliceInterval interval) {
  switch (interval) {
    case TimeSliceInterval::kDefault: return "Default";
    case TimeSliceInterval::kShort: return "Short";
    case TimeSliceInterval::kMedium: return "Medium";
    case TimeSliceInterval::kLong: return "Long";
  }
  return "Default";
}

std::optional<TimeSliceInterval> TimeSliceOf(const GpuConfig& config) {
  if (!config.Uses(kTimeSlicingStrategy)) return std::nullopt;
  const auto& block = config.sharing->Settings<TimeSlicingConfig>();
  if (!block || !block->interval) return TimeSliceInterval::kDefault;
  return ParseTimeSliceInterval(*block->interval);
}

const SharingBlockKind& TimeSlicingConfig::BlockKind() {
  static const SharingBlockKind kind = [] {
    SharingBlockDefinition<TimeSlicingConfig> d;
    d.strategy = std::string(kTimeSlicingStrategy);
    d.gate = config::Gate::kTimeSlicingSettings;
    d.json_key = "timeSlicingConfig";
    d.go_type = "TimeSlicingConfig";
    d.config_kinds = {kGpuConfigKind};
    d.decode = Decode;
    d.fill_defaults = FillDefaults;
    d.validate = Validate;
    d.write_fields = Write;
    return DefineSharingBlock(d);
  }();
  return kind;
}

}  // namespace nvdra::gpu
