#include "computedomain/compute_domain_config_kinds.h"

#include "config/config_kind.h"

namespace nvdra::computedomain {
namespace {

using config::ConfigWalker;
using config::FeatureGates;
using config::JsonValue;
using namespace config::fields;

// The ComputeDomain kind's driver (kDriverName of
// computedomain/compute_domain_kind.h).
constexpr const char* kComputeDomainDriver = "compute-domain.nvidia.com";

void NormalizeChannel(ComputeDomainChannelConfig& c, const FeatureGates&) {
  if (c.allocation_mode.empty()) c.allocation_mode = std::string(kAllocationModeSingle);
}

Status ValidateChannel(const ComputeDomainChannelConfig& c, const FeatureGates&) {
  if (c.domain_id.empty()) return InvalidArgument("domainID cannot be empty");
  // Upstream leaves this to the ComputeDomain CRD's enum, which
  // does not cover configs written into claims by hand.
  const std::string& m = c.allocation_mode;
  if (m.empty() || m == kAllocationModeSingle || m == kAllocationModeAll) return Status::Ok();
  return InvalidArgument("unknown allocationMode: " + m + ", supported allocation modes: Single, All");
}

Status ValidateDaemon(const ComputeDomainDaemonConfig& c, const FeatureGates&) {
  if (c.domain_id.empty()) return InvalidArgument("domainID cannot be empty");
  return Status::Ok();
}

void WriteChannel(const ComputeDomainChannelConfig& c, nlohmann::ordered_json& j) {
  j["domainID"] = c.domain_id;
  if (!c.allocation_mode.empty()) j["allocationMode"] = c.allocation_mode;
}

void WriteDaemon(const ComputeDomainDaemonConfig& c, nlohmann::ordered_json& j) { j["domainID"] = c.domain_id; }

void DecodeChannelConfig(ConfigWalker& w, const JsonValue& root, ComputeDomainChannelConfig& c) {
  std::string ignored;
  w.Struct(root, "ComputeDomainChannelConfig",
           {
               {"apiVersion", [&](const JsonValue& x) { String(w, x, ignored); }},
               {"kind", [&](const JsonValue& x) { String(w, x, ignored); }},
               {"domainID", [&](const JsonValue& x) { String(w, x, c.domain_id); }},
               {"allocationMode", [&](const JsonValue& x) { String(w, x, c.allocation_mode); }},
           });
}

void DecodeDaemonConfig(ConfigWalker& w, const JsonValue& root, ComputeDomainDaemonConfig& c) {
  std::string ignored;
  w.Struct(root, "ComputeDomainDaemonConfig",
           {
               {"apiVersion", [&](const JsonValue& x) { String(w, x, ignored); }},
               {"kind", [&](const JsonValue& x) { String(w, x, ignored); }},
               {"domainID", [&](const JsonValue& x) { String(w, x, c.domain_id); }},
           });
}

}  // namespace

const config::ConfigKind& ComputeDomainChannelConfig::Kind() {
  static const config::ConfigKind kind = config::DefineConfigKind<ComputeDomainChannelConfig>({
      .api_version = std::string(config::kApiVersion),
      .kind = std::string(kComputeDomainChannelConfigKind),
      .driver = kComputeDomainDriver,
      .decode = DecodeChannelConfig,
      .normalize = NormalizeChannel,
      .validate = ValidateChannel,
      .write_fields = WriteChannel,
  });
  return kind;
}

const config::ConfigKind& ComputeDomainDaemonConfig::Kind() {
  static const config::ConfigKind kind = config::DefineConfigKind<ComputeDomainDaemonConfig>({
      .api_version = std::string(config::kApiVersion),
      .kind = std::string(kComputeDomainDaemonConfigKind),
      .driver = kComputeDomainDriver,
      .decode = DecodeDaemonConfig,
      .validate = ValidateDaemon,
      .write_fields = WriteDaemon,
  });
  return kind;
}

Status RegisterComputeDomainConfigKinds() {
  NVDRA_RETURN_IF_ERROR(config::RegisterConfigKind(ComputeDomainChannelConfig::Kind()));
  return config::RegisterConfigKind(ComputeDomainDaemonConfig::Kind());
}

}  // namespace nvdra::computedomain
