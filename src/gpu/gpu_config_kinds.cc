#include "gpu/gpu_config_kinds.h"

namespace nvdra::gpu {
namespace {

using config::ConfigWalker;
using config::FeatureGates;
using config::JsonValue;

constexpr SharingScope kGpuSharing{kGpuConfigKind, "GpuSharing"};

void Decode(ConfigWalker& w, const JsonValue& root, GpuConfig& c) {
  std::string ignored;
  w.Struct(root, "GpuConfig",
           {
               {"apiVersion", [&](const JsonValue& x) { config::fields::String(w, x, ignored); }},
               {"kind", [&](const JsonValue& x) { config::fields::String(w, x, ignored); }},
               {"sharing", [&](const JsonValue& x) { DecodeSharing(w, x, c.sharing, kGpuSharing); }},
           });
}

void Normalize(GpuConfig& c, const FeatureGates& gates) {
  if (c.sharing) NormalizeSharing(*c.sharing, gates, kGpuSharing);
}

Status Validate(const GpuConfig& c, const FeatureGates& gates) {
  return c.sharing ? ValidateSharing(*c.sharing, gates, kGpuSharing) : Status::Ok();
}

// The canonical JSON: fields in declaration order.
void Write(const GpuConfig& c, nlohmann::ordered_json& j) {
  if (c.sharing) j["sharing"] = SharingToJson(*c.sharing, kGpuSharing);
}

// What upstream's webhook leaves to Prepare, taken out so that Validate
// judges only what upstream's Validate judges.
void UpstreamView(GpuConfig& c) {
  if (c.sharing) UpstreamSharingView(*c.sharing, kGpuSharing);
}

}  // namespace

const config::ConfigKind& GpuConfig::Kind() {
  static const config::ConfigKind kind = DefineGpuConfigKind<GpuConfig>(kGpuConfigKind, Decode, Normalize, Validate,
                                                                        Write, UpstreamView);
  return kind;
}

}  // namespace nvdra::gpu
