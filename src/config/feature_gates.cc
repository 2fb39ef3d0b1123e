#include "config/feature_gates.h"

#include <algorithm>
#include <array>
#include <vector>

namespace nvdra::config {
namespace {

constexpr GateSpec kGates[] = {
    {Gate::kTimeSlicingSettings, "TimeSlicingSettings", false, Stage::kAlpha},
    {Gate::kMPSSupport, "MPSSupport", false, Stage::kAlpha},
    {Gate::kIMEXDaemonsWithDNSNames, "IMEXDaemonsWithDNSNames", true, Stage::kBeta},
    {Gate::kPassthroughSupport, "PassthroughSupport", false, Stage::kAlpha},
    {Gate::kDynamicMIG, "DynamicMIG", false, Stage::kAlpha},
    {Gate::kNVMLDeviceHealthCheck, "NVMLDeviceHealthCheck", false, Stage::kAlpha},
    {Gate::kComputeDomainCliques, "ComputeDomainCliques", true, Stage::kBeta},
    {Gate::kCrashOnNVLinkFabricErrors, "CrashOnNVLinkFabricErrors", true, Stage::kBeta},
    {Gate::kDeviceMetadata, "DeviceMetadata", false, Stage::kAlpha},
    {Gate::kFabricManagerPartitioning, "FabricManagerPartitioning", false, Stage::kAlpha},
    {Gate::kHostManagedIMEXDaemon, "HostManagedIMEXDaemon", false, Stage::kAlpha},
    {Gate::kDRAListTypeAttributes, "DRAListTypeAttributes", false, Stage::kAlpha},
    {Gate::kConsumableShares, "ConsumableShares", false, Stage::kAlpha},
    // Beta in component-base; upstream additionally forces it on.
    {Gate::kContextualLogging, "ContextualLogging", true, Stage::kBeta},
    {Gate::kLoggingAlphaOptions, "LoggingAlphaOptions", false, Stage::kAlpha},
    {Gate::kLoggingBetaOptions, "LoggingBetaOptions", true, Stage::kBeta},
};
static_assert(std::size(kGates) == static_cast<size_t>(Gate::kLoggingBetaOptions) + 1);

const GateSpec& SpecOf(Gate gate) { return kGates[static_cast<size_t>(gate)]; }

std::string_view TrimSpace(std::string_view s) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// Go's strconv.ParseBool.
std::optional<bool> ParseGoBool(std::string_view v) {
  for (std::string_view t : {"1", "t", "T", "TRUE", "true", "True"}) {
    if (v == t) return true;
  }
  for (std::string_view f : {"0", "f", "F", "FALSE", "false", "False"}) {
    if (v == f) return false;
  }
  return std::nullopt;
}

}  // namespace

std::span<const GateSpec> FeatureGates::Known() { return kGates; }

std::vector<std::string> FeatureGates::KnownFeatures() {
  auto line = [](std::string_view name, std::string_view stage, bool default_enabled) {
    return std::string(name) + "=true|false (" + std::string(stage) +
           " - default=" + (default_enabled ? "true" : "false") + ")";
  };
  std::vector<std::string> known = {line("AllAlpha", "ALPHA", false), line("AllBeta", "BETA", false)};
  for (const GateSpec& s : kGates) {
    if (s.stage == Stage::kAlpha) known.push_back(line(s.name, "ALPHA", s.default_enabled));
    if (s.stage == Stage::kBeta) known.push_back(line(s.name, "BETA", s.default_enabled));
  }
  std::sort(known.begin(), known.end());
  return known;
}

std::string FeatureGates::FlagHelp() {
  std::string help =
      "A set of key=value pairs that describe feature gates for alpha/experimental features. Options are:";
  for (const std::string& k : KnownFeatures()) help += "\n     " + k;
  return help;
}

std::optional<Gate> FeatureGates::FromName(std::string_view name) {
  for (const GateSpec& spec : kGates) {
    if (spec.name == name) return spec.gate;
  }
  return std::nullopt;
}

std::string_view FeatureGates::Name(Gate gate) { return SpecOf(gate).name; }

Result<FeatureGates> FeatureGates::Parse(std::string_view spec) {
  // Collect first (later items win), then apply, like component-base's
  // Set -> SetFromMap.
  std::vector<std::pair<std::string, bool>> items;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    if (comma == std::string_view::npos) comma = spec.size();
    std::string_view item = spec.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    std::string key(TrimSpace(item.substr(0, eq)));
    if (eq == std::string_view::npos) return InvalidArgument("missing bool value for " + key);
    std::string_view value = TrimSpace(item.substr(eq + 1));
    std::optional<bool> b = ParseGoBool(value);
    if (!b) {
      return InvalidArgument("invalid value of " + key + "=" + std::string(value) +
                             ", err: strconv.ParseBool: parsing \"" + std::string(value) + "\": invalid syntax");
    }
    auto it = std::find_if(items.begin(), items.end(), [&](const auto& p) { return p.first == key; });
    if (it != items.end()) {
      it->second = *b;
    } else {
      items.emplace_back(key, *b);
    }
  }

  FeatureGates gates;
  std::optional<bool> all_alpha, all_beta;
  for (const auto& [key, value] : items) {
    if (key == "AllAlpha") {
      all_alpha = value;
      continue;
    }
    if (key == "AllBeta") {
      all_beta = value;
      continue;
    }
    std::optional<Gate> gate = FromName(key);
    if (!gate) return InvalidArgument("unrecognized feature gate: " + key);
    gates.explicit_[static_cast<size_t>(*gate)] = value;
  }
  for (const GateSpec& s : kGates) {
    auto& slot = gates.explicit_[static_cast<size_t>(s.gate)];
    if (slot) continue;  // an explicit setting beats AllAlpha/AllBeta
    if (s.stage == Stage::kAlpha && all_alpha) slot = *all_alpha;
    if (s.stage == Stage::kBeta && all_beta) slot = *all_beta;
  }
  return gates;
}

bool FeatureGates::Enabled(Gate gate) const {
  const auto& slot = explicit_[static_cast<size_t>(gate)];
  return slot ? *slot : SpecOf(gate).default_enabled;
}

FeatureGates FeatureGates::With(Gate gate, bool enabled) const {
  FeatureGates copy = *this;
  copy.explicit_[static_cast<size_t>(gate)] = enabled;
  return copy;
}

Status FeatureGates::Validate() const {
  auto requires_gate = [&](Gate a, Gate b) -> Status {
    if (Enabled(a) && !Enabled(b)) {
      return InvalidArgument("feature gate " + std::string(Name(a)) + " requires " + std::string(Name(b)) +
                             " to also be enabled");
    }
    return Status::Ok();
  };
  auto exclusive = [&](Gate a, Gate b) -> Status {
    if (Enabled(a) && Enabled(b)) {
      return InvalidArgument("feature gate " + std::string(Name(a)) + " is currently mutually exclusive with " +
                             std::string(Name(b)));
    }
    return Status::Ok();
  };
  NVDRA_RETURN_IF_ERROR(requires_gate(Gate::kComputeDomainCliques, Gate::kIMEXDaemonsWithDNSNames));
  NVDRA_RETURN_IF_ERROR(exclusive(Gate::kDynamicMIG, Gate::kPassthroughSupport));
  NVDRA_RETURN_IF_ERROR(exclusive(Gate::kDynamicMIG, Gate::kNVMLDeviceHealthCheck));
  NVDRA_RETURN_IF_ERROR(exclusive(Gate::kDynamicMIG, Gate::kMPSSupport));
  NVDRA_RETURN_IF_ERROR(exclusive(Gate::kPassthroughSupport, Gate::kNVMLDeviceHealthCheck));
  NVDRA_RETURN_IF_ERROR(requires_gate(Gate::kDeviceMetadata, Gate::kPassthroughSupport));
  return Status::Ok();
}

Status FeatureGates::RefuseUnimplemented() const {
  // None today: a gate upstream adds goes here until nvdra implements it.
  static constexpr std::array<Gate, 0> kNotYet{};
  std::string names;
  size_t count = 0;
  for (Gate g : kNotYet) {
    if (!Enabled(g)) continue;
    names += (names.empty() ? "" : ", ") + std::string(Name(g));
    ++count;
  }
  if (count == 0) return Status::Ok();
  return FailedPrecondition(std::string(count == 1 ? "feature gate " : "feature gates ") + names +
                            (count == 1 ? " is" : " are") + " not implemented by nvdra yet; disable " +
                            (count == 1 ? "it" : "them") +
                            " (nvdra refuses to start rather than run without what a gate promises)");
}

std::string FeatureGates::ToString() const {
  std::vector<std::string> pairs;
  for (const GateSpec& s : kGates) {
    pairs.push_back(std::string(s.name) + "=" + (Enabled(s.gate) ? "true" : "false"));
  }
  std::sort(pairs.begin(), pairs.end());
  std::string out;
  for (const auto& p : pairs) {
    if (!out.empty()) out += ",";
    out += p;
  }
  return out;
}

}  // namespace nvdra::config
