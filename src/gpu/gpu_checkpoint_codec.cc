#include "gpu/gpu_checkpoint_codec.h"

#include <algorithm>
#include <map>

#include "gpu/gpu_config_kinds.h"
#include "gpu/gpu_device_types.h"
#include "gpu/gpu_handlers.h"
#include "gpu/gpu_undo.h"
#include "gpu/time_slicing_config.h"
#include "gpu/time_slicing_undo.h"
#include "ledger/go_json.h"
#include "ledger/legacy_checkpoint.h"

namespace nvdra::gpu {

namespace {

// The time-slicing settings the configs of a request ask for (later ones
// take precedence, like upstream), or nullopt when they do not.
std::optional<int> TimeSliceOf(const std::vector<nlohmann::json>& config_parameters) {
  std::optional<int> interval;
  for (const auto& p : config_parameters) {
    if (ledger::GoStr(p, {"kind"}) != "GpuConfig") continue;
    const nlohmann::json* sharing = ledger::GoField(p, {"sharing"});
    if (sharing == nullptr || ledger::GoStr(*sharing, {"strategy"}) != kTimeSlicingStrategy) {
      interval.reset();
      continue;
    }
    const nlohmann::json* ts = ledger::GoField(*sharing, {"timeSlicingConfig"});
    std::string name = ts != nullptr ? ledger::GoStr(*ts, {"interval"}) : "";
    auto parsed = ParseTimeSliceInterval(name.empty() ? "Default" : name);
    interval = static_cast<int>(parsed.value_or(TimeSliceInterval::kDefault));
  }
  return interval;
}

// Whether the Go driver set the time slice of a group's GPUs: its
// configState says so since timeSliceApplied exists; before that, the
// configs that applied to the group's requests do.
bool TimeSliceApplied(const ledger::UpstreamPreparedGroup& g, const ledger::UpstreamClaim& claim,
                      std::optional<int>& interval) {
  for (const auto& d : g.devices) {
    for (const auto& r : d.device.requests) {
      if (auto i = TimeSliceOf(claim.ParametersFor(r))) interval = i;
    }
  }
  const nlohmann::json* applied = g.config_state.is_object() ? ledger::GoField(g.config_state, {"timeSliceApplied"})
                                                             : nullptr;
  if (applied != nullptr && applied->is_boolean()) return applied->get<bool>();
  return interval.has_value();
}

}  // namespace

GpuCheckpointCodec::GpuCheckpointCodec() : pieces_(BuiltinCheckpointPieces()) {}

std::string GpuCheckpointCodec::driver_name() const { return kDriverName; }

std::string GpuCheckpointCodec::HeldByAnotherClaim(const std::string& resource, const std::string& holder,
                                                   const std::vector<std::string>& requested) const {
  return ledger::UpstreamHeldByAnotherClaim(resource, holder, requested);
}

std::optional<std::string> GpuCheckpointCodec::UpstreamPreparedDevices(const ledger::ClaimEntry& e) const {
  // The Go driver's undo of time-slicing needs each GPU's UUID.
  std::map<std::string, std::string> uuids;
  if (e.undo.is_object()) {
    for (const auto& ts : e.undo.value("timeSlicing", nlohmann::json::array())) {
      if (ts.is_object()) uuids[ts.value("device", "")] = ts.value("uuid", "");
    }
  }
  std::string members, state;
  for (const auto& p : pieces_) {
    members += p.whole_gpu_members;
    state += p.empty_config_state;
  }
  std::string devs;
  for (const auto& d : e.prepared) {
    // Only whole GPUs: the Go driver's other groups need facts this driver does not record.
    if (d.device.rfind("gpu-", 0) != 0) return std::nullopt;
    for (const auto& p : pieces_) {
      if (p.undescribable && p.undescribable(d.device)) return std::nullopt;
    }
    if (!devs.empty()) devs += ",";
    devs += "{\"gpu\":{\"info\":{\"uuid\":" + ledger::GoString(uuids[d.device]) +
            "},\"device\":" + ledger::GoCheckpointedDevice(d) + "}" + members + "}";
  }
  if (!state.empty()) state.erase(0, 1);  // the first member's comma
  return "[{\"devices\":[" + devs + "],\"configState\":{" + state + "}}]";
}

std::string GpuCheckpointCodec::UpstreamConfigState(std::string_view raw, ledger::UpstreamRelease release) const {
  using ledger::UpstreamRelease;
  auto members = ledger::RawObjectMembers(raw);
  if (!members.ok()) return std::string(raw);
  auto value_of = [&](const char* key) -> std::string_view {
    for (const auto& [k, v] : *members) {
      if (ledger::GoKeyIs(k, key)) return v;
    }
    return {};
  };
  // The struct's fields in its order; a *bool is omitempty (absent or null
  // is left out), as is the daemon id on main when empty.
  std::string out = "{";
  auto add = [&](const char* key, std::string_view value) {
    out += (out.size() > 1 ? ",\"" : "\"") + std::string(key) + "\":" + std::string(value);
  };
  for (const auto& p : pieces_) {
    if (p.config_state) p.config_state(value_of, release, add);
  }
  if (release >= UpstreamRelease::kV0_4_1) {
    std::string_view ts = value_of("timeSliceApplied");
    if (!ts.empty() && ts != "null") add("timeSliceApplied", ts);
  }
  return out + "}";
}

nlohmann::json GpuCheckpointCodec::ImportUndo(const ledger::ClaimEntry& e, const ledger::UpstreamClaim& claim) const {
  GpuUndo undo;  // devices stay empty: the entry's prepared devices name them
  for (const auto& g : claim.groups) {
    for (const auto& p : pieces_) {
      if (p.import) p.import(g, undo);
    }
    std::optional<int> interval;
    if (!TimeSliceApplied(g, claim, interval)) continue;
    // Only whole GPUs: upstream sets the time slice through no other device.
    for (const auto& d : g.devices) {
      if (d.type != "gpu") continue;
      const nlohmann::json* info = ledger::GoField(d.member, {"info"});
      std::string uuid = info != nullptr ? ledger::GoStr(*info, {"uuid"}) : "";
      if (uuid.empty()) continue;
      undo.Get<TimeSlicingUndo>().items.push_back({d.device.device, uuid, interval.value_or(0),
                                                   nlohmann::json::object()});
    }
  }
  return EncodeGpuUndo(undo);
}

std::vector<ledger::HeldShare> GpuCheckpointCodec::ImportHeldCapacity(const ledger::ClaimEntry& e) const {
  std::vector<ledger::HeldShare> out;
  for (const auto& p : pieces_) {
    if (p.import_held) p.import_held(e, out);
  }
  return out;
}

}  // namespace nvdra::gpu
