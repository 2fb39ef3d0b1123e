#include "gpu/vfio_config.h"

#include "gpu/gpu_config_kinds.h"

namespace nvdra::gpu {
namespace {

using config::ConfigWalker;
using config::FeatureGates;
using config::JsonValue;
using namespace config::fields;
using Type = JsonValue::Type;

void Decode(ConfigWalker& w, const JsonValue& root, VfioDeviceConfig& c) {
  std::string ignored;
  w.Struct(root, "VfioDeviceConfig",
           {
               {"apiVersion", [&](const JsonValue& x) { String(w, x, ignored); }},
               {"kind", [&](const JsonValue& x) { String(w, x, ignored); }},
               {"iommu",
                [&](const JsonValue& x) {
                  if (x.type == Type::kNull) {
                    c.iommu.reset();
                    return;
                  }
                  if (!ExpectObject(w, x, "v1beta1.IOMMUConfig")) return;
                  IommuConfig i;
                  w.Struct(x, "IOMMUConfig",
                           {
                               {"backendPolicy",
                                [&](const JsonValue& y) {
                                  String(w, y, i.backend_policy, "v1beta1.IOMMUBackendPolicy");
                                }},
                               {"enableAPIDevice", [&](const JsonValue& y) { OptBool(w, y, i.enable_api_device); }},
                           });
                  c.iommu = std::move(i);
                }},
           });
}

void Normalize(VfioDeviceConfig& c, const FeatureGates&) {
  if (!c.iommu) c.iommu.emplace();
  if (c.iommu->backend_policy.empty()) c.iommu->backend_policy = std::string(kIommuLegacyOnly);
  if (!c.iommu->enable_api_device) c.iommu->enable_api_device = false;
}

Status Validate(const VfioDeviceConfig& c, const FeatureGates&) {
  if (!c.iommu) return Status::Ok();
  const std::string& p = c.iommu->backend_policy;
  if (p == kIommuLegacyOnly || p == kIommuPreferIommuFD) return Status::Ok();
  return InvalidArgument("unknown IOMMU backend policy: " + p +
                         ", supported IOMMU backend policies: LegacyOnly, PreferIommuFD");
}

// The canonical JSON: fields in declaration order.
void Write(const VfioDeviceConfig& c, nlohmann::ordered_json& j) {
  if (!c.iommu) return;
  nlohmann::ordered_json i = nlohmann::ordered_json::object();
  i["backendPolicy"] = c.iommu->backend_policy;
  if (c.iommu->enable_api_device) i["enableAPIDevice"] = *c.iommu->enable_api_device;
  j["iommu"] = std::move(i);
}

// Upstream's webhook judges all of a VfioDeviceConfig.
void UpstreamView(VfioDeviceConfig&) {}

}  // namespace

const config::ConfigKind& VfioDeviceConfig::Kind() {
  static const config::ConfigKind kind = DefineGpuConfigKind<VfioDeviceConfig>(kVfioDeviceConfigKind, Decode, Normalize,
                                                                               Validate, Write, UpstreamView);
  return kind;
}

}  // namespace nvdra::gpu
