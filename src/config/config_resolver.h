// Decides which opaque config applies to each allocated device of a claim:
// driver defaults < DeviceClass configs < claim configs, later beats earlier,
// request-scoped configs only for their requests, unscoped configs only for
// devices of a matching type, other drivers' configs ignored. Every selected
// config is decoded strictly, normalized and validated here, without I/O, so
// the claim engine can reject a bad claim before its first durable write.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "config/feature_gates.h"
#include "config/opaque_config.h"
#include "model/claim.h"
#include "util/status.h"

namespace nvdra::config {

// kOther: a source this API version does not know (ClaimConfig::
// source_name says which); refused, as upstream refuses it.
enum class ConfigSource { kFromClass, kFromClaim, kOther };

// The source named `name` ("FromClass", "FromClaim"; anything else kOther).
ConfigSource ParseConfigSource(std::string_view name);

// One entry of ResourceClaim.status.allocation.devices.config.
struct ClaimConfig {
  ConfigSource source = ConfigSource::kFromClaim;
  std::string source_name;            // as the claim says it, for kOther
  std::vector<std::string> requests;  // empty: applies to every request
  std::string driver;                 // opaque.driver
  std::string parameters_json;        // opaque.parameters, raw bytes as received
  bool opaque = true;                 // false: a config kind this API version does not know
};

// The device type ("gpu", "mig", "channel", ...) of an allocated device, as
// the device kind names it.
using DeviceTypeOf = std::function<std::string(const model::AllocationResult& result)>;

// One device type a driver serves and the config kind that applies to its
// devices (KindOf: the name of a registered kind, config/config_kind.h).
struct DeviceTypeRule {
  std::string type;
  std::string config_kind;
  friend bool operator==(const DeviceTypeRule&, const DeviceTypeRule&) = default;
};

// What one driver serves, as its device kind declares it: the device types
// with the config kind of each, and the configs that apply to a device when
// no class or claim config does (lowest precedence first). The resolver
// itself knows no driver and no device type.
struct DriverConfigRules {
  std::string driver;
  std::vector<DeviceTypeRule> device_types;
  std::vector<Config> defaults;
  // Appended to the error for a device no config applies to (a type whose
  // default is switched off, e.g. by a feature gate).
  std::string missing_config_hint;
};

// Where a selected config came from; for logs and error context.
struct ConfigOrigin {
  enum class Kind { kDefault, kClass, kClaim } kind = Kind::kDefault;
  size_t index = 0;  // position among the claim's config entries (class or claim)
  std::string ToString() const;
  friend bool operator==(const ConfigOrigin&, const ConfigOrigin&) = default;
};

struct ConfigGroup {
  Config config;  // normalized and validated
  ConfigOrigin origin;
  std::vector<model::AllocationResult> results;  // sorted by (request, device)
};

// Returns one group per config that applies to at least one result, sorted
// by the first result's (request, device), so equal input gives equal output.
// Errors (all permanent for the claim) carry upstream's wording, e.g.
//   error getting opaque device configs: invalid config source: FromElsewhere
//   error getting opaque device configs: error decoding config parameters:
//       strict decoding error: unknown field "unexpectedField"
//   cannot apply <kind> to device "gpu-0" of type "mig" (request: r0)
//   <the kind's validation context>: <the kind's message>
//   only opaque parameters are supported by this driver
// Whether a sharing strategy is served is the device kind's decision
// (ClaimKind::Plan), not the resolver's.
Result<std::vector<ConfigGroup>> ResolveConfigs(const DriverConfigRules& rules, const std::vector<ClaimConfig>& configs,
                                                const std::vector<model::AllocationResult>& results,
                                                const DeviceTypeOf& type_of, const FeatureGates& gates);

}  // namespace nvdra::config
