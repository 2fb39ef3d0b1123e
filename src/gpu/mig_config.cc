#include "gpu/mig_config.h"

#include "gpu/gpu_config_kinds.h"

namespace nvdra::gpu {
namespace {

using config::ConfigWalker;
using config::FeatureGates;
using config::JsonValue;

constexpr SharingScope kMigSharing{kMigDeviceConfigKind, "MigDeviceSharing"};

void Decode(ConfigWalker& w, const JsonValue& root, MigDeviceConfig& c) {
  std::string ignored;
  w.Struct(root, "MigDeviceConfig",
           {
               {"apiVersion", [&](const JsonValue& x) { config::fields::String(w, x, ignored); }},
               {"kind", [&](const JsonValue& x) { config::fields::String(w, x, ignored); }},
               {"sharing", [&](const JsonValue& x) { DecodeSharing(w, x, c.sharing, kMigSharing); }},
           });
}

void Normalize(MigDeviceConfig& c, const FeatureGates& gates) {
  if (c.sharing) NormalizeSharing(*c.sharing, gates, kMigSharing);
}

Status Validate(const MigDeviceConfig& c, const FeatureGates& gates) {
  return c.sharing ? ValidateSharing(*c.sharing, gates, kMigSharing) : Status::Ok();
}

void Write(const MigDeviceConfig& c, nlohmann::ordered_json& j) {
  if (c.sharing) j["sharing"] = SharingToJson(*c.sharing, kMigSharing);
}

void UpstreamView(MigDeviceConfig& c) {
  if (c.sharing) UpstreamSharingView(*c.sharing, kMigSharing);
}

}  // namespace

const config::ConfigKind& MigDeviceConfig::Kind() {
  static const config::ConfigKind kind = DefineGpuConfigKind<MigDeviceConfig>(kMigDeviceConfigKind, Decode, Normalize,
                                                                              Validate, Write, UpstreamView);
  return kind;
}

}  // namespace nvdra::gpu
