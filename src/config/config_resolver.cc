#include "config/config_resolver.h"

#include <algorithm>
#include <optional>

#include "config/config_decoder.h"
#include "config/config_kind.h"

namespace nvdra::config {
namespace {

struct Candidate {
  std::vector<std::string> requests;
  Config config;
  ConfigOrigin origin;
};

const DeviceTypeRule* RuleFor(const DriverConfigRules& rules, std::string_view type) {
  for (const auto& r : rules.device_types) {
    if (r.type == type) return &r;
  }
  return nullptr;
}

bool Matches(const DriverConfigRules& rules, const Config& c, std::string_view device_type) {
  const DeviceTypeRule* rule = RuleFor(rules, device_type);
  return rule != nullptr && rule->config_kind == KindOf(c);
}

Status TypeMismatch(const DriverConfigRules& rules, const Config& c, const model::AllocationResult& r,
                    const std::string& type) {
  std::string kind(KindOf(c));
  // Upstream words this differently for some kinds (its GPU config kinds
  // name the device and its type); the kind says which.
  if (c.kind() == nullptr || !c.kind()->mismatch_names_device) {
    return InvalidArgument("cannot apply " + kind + " to request: " + r.request);
  }
  return InvalidArgument("cannot apply " + kind + " to device \"" + r.device + "\" of type \"" + type +
                         "\" (request: " + r.request + ")");
}

std::vector<Candidate> Defaults(const DriverConfigRules& rules) {
  std::vector<Candidate> out;
  for (const auto& c : rules.defaults) out.push_back({{}, c, {}});
  return out;
}

// DeviceClaimConfiguration.requests may name a main request, which then
// covers all of its subrequests ("gpu" matches the result request
// "gpu/large"), or one subrequest exactly. Upstream compares whole strings
// and so silently skips configs for requests that use firstAvailable.
bool NamesRequest(const std::vector<std::string>& requests, const std::string& result_request) {
  std::string_view main = result_request;
  if (size_t slash = main.find('/'); slash != std::string_view::npos) main = main.substr(0, slash);
  for (const auto& r : requests) {
    if (r == result_request || r == main) return true;
  }
  return false;
}

bool ResultLess(const model::AllocationResult& a, const model::AllocationResult& b) {
  return std::tie(a.request, a.device) < std::tie(b.request, b.device);
}

// Like upstream, a source it does not know fails the claim, whichever
// driver the config is for, before any config is decoded.
Status RefuseUnknownSources(const std::vector<ClaimConfig>& configs) {
  for (const ClaimConfig& cc : configs) {
    if (cc.source == ConfigSource::kOther) {
      return InvalidArgument("error getting opaque device configs: invalid config source: " + cc.source_name);
    }
  }
  return Status::Ok();
}

}  // namespace

ConfigSource ParseConfigSource(std::string_view name) {
  if (name == "FromClass") return ConfigSource::kFromClass;
  if (name == "FromClaim") return ConfigSource::kFromClaim;
  return ConfigSource::kOther;
}

std::string ConfigOrigin::ToString() const {
  switch (kind) {
    case Kind::kDefault: return "driver default";
    case Kind::kClass: return "class config #" + std::to_string(index);
    case Kind::kClaim: return "claim config #" + std::to_string(index);
  }
  return "config";
}

Result<std::vector<ConfigGroup>> ResolveConfigs(const DriverConfigRules& rules, const std::vector<ClaimConfig>& configs,
                                                const std::vector<model::AllocationResult>& results,
                                                const DeviceTypeOf& type_of, const FeatureGates& gates) {
  const std::string& driver = rules.driver;
  if (rules.device_types.empty()) {
    return InvalidArgument("driver \"" + driver + "\" declares no device types, so no opaque config can apply");
  }
  std::vector<Candidate> candidates = Defaults(rules);
  NVDRA_RETURN_IF_ERROR(RefuseUnknownSources(configs));

  // Class configs first, then claim configs, each in their given order:
  // walking the list backwards then finds the highest precedence first.
  // Like upstream, every config of this driver is decoded, used or not.
  for (ConfigSource source : {ConfigSource::kFromClass, ConfigSource::kFromClaim}) {
    for (size_t i = 0; i < configs.size(); ++i) {
      const ClaimConfig& cc = configs[i];
      if (cc.source != source) continue;
      if (!cc.opaque) return InvalidArgument("only opaque parameters are supported by this driver");
      if (cc.driver != driver) continue;
      auto decoded = DecodeStrict(cc.parameters_json);
      if (!decoded.ok()) {
        return decoded.status().Wrap("error getting opaque device configs: error decoding config parameters");
      }
      ConfigOrigin origin{source == ConfigSource::kFromClass ? ConfigOrigin::Kind::kClass : ConfigOrigin::Kind::kClaim,
                          i};
      candidates.push_back({cc.requests, std::move(decoded).value(), origin});
    }
  }

  // For each result, the index of the candidate that applies to it.
  std::vector<std::vector<model::AllocationResult>> assigned(candidates.size());
  for (const model::AllocationResult& r : results) {
    if (!r.driver.empty() && r.driver != driver) continue;
    const std::string type = type_of(r);
    if (RuleFor(rules, type) == nullptr) {
      return InvalidArgument("device \"" + r.device + "\" (request: " + r.request + ") has type \"" + type +
                             "\", which driver " + driver + " does not serve");
    }
    std::optional<size_t> chosen;
    for (size_t i = candidates.size(); i-- > 0;) {
      const Candidate& c = candidates[i];
      if (NamesRequest(c.requests, r.request)) {
        if (!Matches(rules, c.config, type)) return TypeMismatch(rules, c.config, r, type);
        chosen = i;
        break;
      }
      if (c.requests.empty() && Matches(rules, c.config, type)) {
        chosen = i;
        break;
      }
    }
    if (!chosen) {
      // Only a type whose default the kind switched off gets here.
      std::string msg = "no opaque config applies to device \"" + r.device + "\" of type \"" + type +
                        "\" (request: " + r.request + ")";
      if (!rules.missing_config_hint.empty()) msg += "; " + rules.missing_config_hint;
      return InvalidArgument(msg);
    }
    assigned[*chosen].push_back(r);
  }

  std::vector<ConfigGroup> groups;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (assigned[i].empty()) continue;
    std::sort(assigned[i].begin(), assigned[i].end(), ResultLess);
    groups.push_back({std::move(candidates[i].config), candidates[i].origin, std::move(assigned[i])});
  }
  std::sort(groups.begin(), groups.end(), [](const ConfigGroup& a, const ConfigGroup& b) {
    return ResultLess(a.results.front(), b.results.front());
  });

  for (ConfigGroup& g : groups) {
    Normalize(g.config, gates);
    Status st = Validate(g.config, gates);
    if (!st.ok()) return st.Wrap(g.config.kind()->validation_error);
  }
  return groups;
}

}  // namespace nvdra::config
