#include "gpu/gpu_config_kinds.h"

#include <algorithm>
#include <charconv>

#include "config/config_kind.h"

namespace nvdra::gpu {
namespace {

using config::ConfigWalker;
using config::FeatureGates;
using config::Gate;
using config::JsonValue;
using config::Quantity;
using namespace config::fields;
using Type = JsonValue::Type;

// The GPU kind's driver (kDriverName of gpu/gpu_device_types.h).
constexpr const char* kGpuDriver = "gpu.nvidia.com";

std::string Quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

Status ValidateSharingStrategy(const std::string& s, const FeatureGates& gates) {
  auto gate_off = [](std::string_view strategy, Gate gate) {
    return InvalidArgument(Quote(strategy) + " is selected as the GPU sharing strategy, but the " +
                           Quote(FeatureGates::Name(gate)) + " feature gate is not enabled");
  };
  if (s == kTimeSlicingStrategy) {
    return gates.Enabled(Gate::kTimeSlicingSettings) ? Status::Ok()
                                                     : gate_off(kTimeSlicingStrategy, Gate::kTimeSlicingSettings);
  }
  if (s == kMpsStrategy) {
    return gates.Enabled(Gate::kMPSSupport) ? Status::Ok() : gate_off(kMpsStrategy, Gate::kMPSSupport);
  }
  return InvalidArgument("unknown GPU sharing strategy: " + s + ", supported GPU sharing strategies: TimeSlicing, MPS");
}

Status ValidateInterval(const std::optional<std::string>& interval) {
  // Normalize turns a missing interval into "Default"; an un-normalized
  // config without one means the same.
  if (!interval || ParseTimeSliceInterval(*interval)) return Status::Ok();
  return InvalidArgument("unknown time-slice interval: " + *interval +
                         ", supported time-slice intervals: Default, Short, Medium, Long");
}

Status ValidateMps(const MpsConfig& c) {
  if (c.default_active_thread_percentage) {
    if (*c.default_active_thread_percentage < 0) {
      return InvalidArgument("active thread percentage must not be negative");
    }
    if (*c.default_active_thread_percentage > 100) {
      return InvalidArgument("active thread percentage must not be greater than 100");
    }
  }
  // Upstream finds these only when starting the MPS daemon; checking here
  // keeps a doomed claim from reaching the ledger.
  if (c.default_pinned_device_memory_limit && !c.default_pinned_device_memory_limit->HasPositiveMegabytes()) {
    return InvalidArgument("invalid limit: default value set too low: " + c.default_pinned_device_memory_limit->text());
  }
  for (const auto& [key, q] : c.default_per_device_pinned_memory_limit) {
    if (!q.HasPositiveMegabytes()) {
      return InvalidArgument("invalid limit: value set too low: " + key + ": " + q.text());
    }
  }
  return Status::Ok();
}

Status ValidateGpuSharing(const GpuSharing& s, const FeatureGates& gates) {
  NVDRA_RETURN_IF_ERROR(ValidateSharingStrategy(s.strategy, gates));
  if (s.strategy == kTimeSlicingStrategy) {
    if (s.mps_config) return InvalidArgument("cannot use MpsConfig with the 'TimeSlicing' strategy");
    return ValidateInterval(s.time_slicing_config ? s.time_slicing_config->interval : std::nullopt);
  }
  if (s.time_slicing_config) return InvalidArgument("cannot use TimeSlicingConfig with the 'MPS' strategy");
  return s.mps_config ? ValidateMps(*s.mps_config) : Status::Ok();
}

Status ValidateMigSharing(const MigDeviceSharing& s, const FeatureGates& gates) {
  NVDRA_RETURN_IF_ERROR(ValidateSharingStrategy(s.strategy, gates));
  if (s.strategy == kTimeSlicingStrategy) {
    if (s.mps_config) return InvalidArgument("cannot use MpsConfig with the 'TimeSlicing' strategy");
    return Status::Ok();
  }
  return s.mps_config ? ValidateMps(*s.mps_config) : Status::Ok();
}

nlohmann::ordered_json MpsToJson(const MpsConfig& c) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (c.default_active_thread_percentage) j["defaultActiveThreadPercentage"] = *c.default_active_thread_percentage;
  if (c.default_pinned_device_memory_limit)
    j["defaultPinnedDeviceMemoryLimit"] = c.default_pinned_device_memory_limit->text();
  if (!c.default_per_device_pinned_memory_limit.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, q] : c.default_per_device_pinned_memory_limit) m[k] = q.text();
    j["defaultPerDevicePinnedMemoryLimit"] = std::move(m);
  }
  return j;
}

// The defaults and rules of each kind.

void NormalizeGpu(GpuConfig& c, const FeatureGates& gates) {
  if (!c.sharing) return;
  if (gates.Enabled(Gate::kTimeSlicingSettings) && c.sharing->strategy == kTimeSlicingStrategy) {
    // Upstream fills only a missing timeSlicingConfig and then
    // dereferences the nil interval of `timeSlicingConfig: {}`
    // (a crash). An empty block asks for the same as none.
    if (!c.sharing->time_slicing_config) c.sharing->time_slicing_config.emplace();
    if (!c.sharing->time_slicing_config->interval) {
      c.sharing->time_slicing_config->interval = std::string(TimeSliceIntervalName(TimeSliceInterval::kDefault));
    }
  }
  if (gates.Enabled(Gate::kMPSSupport) && c.sharing->strategy == kMpsStrategy && !c.sharing->mps_config) {
    c.sharing->mps_config.emplace();
  }
}

void NormalizeMig(MigDeviceConfig& c, const FeatureGates& gates) {
  if (!c.sharing) return;
  if (gates.Enabled(Gate::kMPSSupport) && c.sharing->strategy == kMpsStrategy && !c.sharing->mps_config) {
    c.sharing->mps_config.emplace();
  }
}

void NormalizeVfio(VfioDeviceConfig& c, const FeatureGates&) {
  if (!c.iommu) c.iommu.emplace();
  if (c.iommu->backend_policy.empty()) c.iommu->backend_policy = std::string(kIommuLegacyOnly);
  if (!c.iommu->enable_api_device) c.iommu->enable_api_device = false;
}

Status ValidateGpu(const GpuConfig& c, const FeatureGates& gates) {
  return c.sharing ? ValidateGpuSharing(*c.sharing, gates) : Status::Ok();
}

Status ValidateMig(const MigDeviceConfig& c, const FeatureGates& gates) {
  return c.sharing ? ValidateMigSharing(*c.sharing, gates) : Status::Ok();
}

Status ValidateVfio(const VfioDeviceConfig& c, const FeatureGates&) {
  if (!c.iommu) return Status::Ok();
  const std::string& p = c.iommu->backend_policy;
  if (p == kIommuLegacyOnly || p == kIommuPreferIommuFD) return Status::Ok();
  return InvalidArgument("unknown IOMMU backend policy: " + p +
                         ", supported IOMMU backend policies: LegacyOnly, PreferIommuFD");
}

// The canonical JSON of each kind: fields in declaration order.

void WriteGpu(const GpuConfig& c, nlohmann::ordered_json& j) {
  if (!c.sharing) return;
  nlohmann::ordered_json s = nlohmann::ordered_json::object();
  s["strategy"] = c.sharing->strategy;
  if (c.sharing->time_slicing_config) {
    nlohmann::ordered_json t = nlohmann::ordered_json::object();
    if (c.sharing->time_slicing_config->interval) t["interval"] = *c.sharing->time_slicing_config->interval;
    s["timeSlicingConfig"] = std::move(t);
  }
  if (c.sharing->mps_config) s["mpsConfig"] = MpsToJson(*c.sharing->mps_config);
  j["sharing"] = std::move(s);
}

void WriteMig(const MigDeviceConfig& c, nlohmann::ordered_json& j) {
  if (!c.sharing) return;
  nlohmann::ordered_json s = nlohmann::ordered_json::object();
  s["strategy"] = c.sharing->strategy;
  if (c.sharing->mps_config) s["mpsConfig"] = MpsToJson(*c.sharing->mps_config);
  j["sharing"] = std::move(s);
}

void WriteVfio(const VfioDeviceConfig& c, nlohmann::ordered_json& j) {
  if (!c.iommu) return;
  nlohmann::ordered_json i = nlohmann::ordered_json::object();
  i["backendPolicy"] = c.iommu->backend_policy;
  if (c.iommu->enable_api_device) i["enableAPIDevice"] = *c.iommu->enable_api_device;
  j["iommu"] = std::move(i);
}

// The decoders, with the Go type names of upstream's API in type errors.

void DecodeMps(ConfigWalker& w, const JsonValue& v, std::optional<MpsConfig>& out) {
  if (v.type == Type::kNull) {
    out.reset();
    return;
  }
  if (!ExpectObject(w, v, "v1beta1.MpsConfig")) return;
  MpsConfig c;
  w.Struct(v, "MpsConfig",
           {
               {"defaultActiveThreadPercentage",
                [&](const JsonValue& x) { OptInt(w, x, c.default_active_thread_percentage); }},
               {"defaultPinnedDeviceMemoryLimit",
                [&](const JsonValue& x) { OptQuantity(w, x, c.default_pinned_device_memory_limit); }},
               {"defaultPerDevicePinnedMemoryLimit",
                [&](const JsonValue& x) {
                  c.default_per_device_pinned_memory_limit.clear();
                  if (!ExpectObject(w, x, "v1beta1.MpsPerDevicePinnedMemoryLimit")) return;
                  w.Map(x, [&](const std::string& key, const JsonValue& q) {
                    if (q.type == Type::kNull) {
                      c.default_per_device_pinned_memory_limit[key] = Quantity();
                      return;
                    }
                    if (auto parsed = ParseQuantityValue(w, q)) c.default_per_device_pinned_memory_limit[key] = *parsed;
                  });
                }},
               {"multiUser", [&](const JsonValue& x) { OptBool(w, x, c.multi_user); }},
           });
  out = std::move(c);
}

void DecodeGpuConfig(ConfigWalker& w, const JsonValue& root, GpuConfig& c) {
  std::string ignored;
  w.Struct(root, "GpuConfig",
           {
               {"apiVersion", [&](const JsonValue& x) { String(w, x, ignored); }},
               {"kind", [&](const JsonValue& x) { String(w, x, ignored); }},
               {"sharing",
                [&](const JsonValue& x) {
                  if (x.type == Type::kNull) {
                    c.sharing.reset();
                    return;
                  }
                  if (!ExpectObject(w, x, "v1beta1.GpuSharing")) return;
                  GpuSharing s;
                  w.Struct(x, "GpuSharing",
                           {
                               {"strategy",
                                [&](const JsonValue& y) { String(w, y, s.strategy, "v1beta1.GpuSharingStrategy"); }},
                               {"timeSlicingConfig",
                                [&](const JsonValue& y) {
                                  if (y.type == Type::kNull) {
                                    s.time_slicing_config.reset();
                                    return;
                                  }
                                  if (!ExpectObject(w, y, "v1beta1.TimeSlicingConfig")) return;
                                  TimeSlicingConfig t;
                                  w.Struct(y, "TimeSlicingConfig", {{"interval", [&](const JsonValue& z) {
                                                                       OptString(w, z, t.interval,
                                                                                 "v1beta1.TimeSliceInterval");
                                                                     }}});
                                  s.time_slicing_config = std::move(t);
                                }},
                               {"mpsConfig", [&](const JsonValue& y) { DecodeMps(w, y, s.mps_config); }},
                           });
                  c.sharing = std::move(s);
                }},
           });
}

void DecodeMigDeviceConfig(ConfigWalker& w, const JsonValue& root, MigDeviceConfig& c) {
  std::string ignored;
  w.Struct(root, "MigDeviceConfig",
           {
               {"apiVersion", [&](const JsonValue& x) { String(w, x, ignored); }},
               {"kind", [&](const JsonValue& x) { String(w, x, ignored); }},
               {"sharing",
                [&](const JsonValue& x) {
                  if (x.type == Type::kNull) {
                    c.sharing.reset();
                    return;
                  }
                  if (!ExpectObject(w, x, "v1beta1.MigDeviceSharing")) return;
                  MigDeviceSharing s;
                  w.Struct(x, "MigDeviceSharing",
                           {
                               {"strategy",
                                [&](const JsonValue& y) { String(w, y, s.strategy, "v1beta1.GpuSharingStrategy"); }},
                               {"mpsConfig", [&](const JsonValue& y) { DecodeMps(w, y, s.mps_config); }},
                           });
                  c.sharing = std::move(s);
                }},
           });
}

void DecodeVfioDeviceConfig(ConfigWalker& w, const JsonValue& root, VfioDeviceConfig& c) {
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

// What upstream's webhook leaves to Prepare, taken out so that Validate
// judges only what upstream's Validate judges: upstream's Validate looks
// only at the settings of the chosen strategy (the other strategy's are
// refused when Prepare reads them), and checks pinned memory limits only
// when the MPS daemon starts.
void DropPinnedLimits(std::optional<MpsConfig>& mps) {
  if (!mps) return;
  mps->default_pinned_device_memory_limit.reset();
  mps->default_per_device_pinned_memory_limit.clear();
}

void UpstreamViewGpu(GpuConfig& c) {
  if (!c.sharing) return;
  GpuSharing& s = *c.sharing;
  if (s.strategy == kTimeSlicingStrategy) s.mps_config.reset();
  if (s.strategy == kMpsStrategy) s.time_slicing_config.reset();
  DropPinnedLimits(s.mps_config);
}

void UpstreamViewMig(MigDeviceConfig& c) {
  if (!c.sharing) return;
  MigDeviceSharing& s = *c.sharing;
  if (s.strategy == kTimeSlicingStrategy) s.mps_config.reset();
  DropPinnedLimits(s.mps_config);
}

void UpstreamViewVfio(VfioDeviceConfig&) {}

// Upstream words errors about these kinds its own way.
template <class T>
config::ConfigKindDefinition<T> GpuKindDefinition(std::string_view kind) {
  config::ConfigKindDefinition<T> d;
  d.api_version = std::string(config::kApiVersion);
  d.kind = std::string(kind);
  d.driver = kGpuDriver;
  d.validation_error = "error validating GPU config";
  d.mismatch_names_device = true;
  return d;
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

std::optional<TimeSliceInterval> GpuConfig::TimeSlice() const {
  if (!IsTimeSlicing()) return std::nullopt;
  if (!sharing->time_slicing_config || !sharing->time_slicing_config->interval) return TimeSliceInterval::kDefault;
  return ParseTimeSliceInterval(*sharing->time_slicing_config->interval);
}

Result<std::map<std::string, std::string>> MpsConfig::PinnedLimitsFor(const std::vector<std::string>& uuids) const {
  std::map<std::string, std::string> limits;
  if (default_pinned_device_memory_limit && !uuids.empty()) {
    if (!default_pinned_device_memory_limit->HasPositiveMegabytes()) {
      return InvalidArgument("invalid limit: default value set too low: " + default_pinned_device_memory_limit->text());
    }
    for (const auto& uuid : uuids) limits[uuid] = default_pinned_device_memory_limit->Megabytes();
  }
  for (const auto& [key, q] : default_per_device_pinned_memory_limit) {
    std::string id;
    if (std::find(uuids.begin(), uuids.end(), key) != uuids.end()) {
      id = key;
    } else {
      // Go's strconv.Atoi: optional sign, decimal digits.
      std::string_view digits = key;
      if (!digits.empty() && digits[0] == '+') digits.remove_prefix(1);
      long long index = 0;
      auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
      if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size()) {
        return InvalidArgument("invalid device: unable to parse key as an integer: " + key);
      }
      if (index < 0 || index >= static_cast<long long>(uuids.size())) {
        return InvalidArgument("invalid device: invalid device index: " + std::to_string(index));
      }
      id = uuids[static_cast<size_t>(index)];
    }
    if (!q.HasPositiveMegabytes()) {
      return InvalidArgument("invalid limit: value set too low: " + key + ": " + q.text());
    }
    limits[id] = q.Megabytes();
  }
  return limits;
}

const config::ConfigKind& GpuConfig::Kind() {
  static const config::ConfigKind kind = [] {
    auto d = GpuKindDefinition<GpuConfig>(kGpuConfigKind);
    d.decode = DecodeGpuConfig;
    d.normalize = NormalizeGpu;
    d.validate = ValidateGpu;
    d.write_fields = WriteGpu;
    d.upstream_admission_view = UpstreamViewGpu;
    return config::DefineConfigKind(d);
  }();
  return kind;
}

const config::ConfigKind& MigDeviceConfig::Kind() {
  static const config::ConfigKind kind = [] {
    auto d = GpuKindDefinition<MigDeviceConfig>(kMigDeviceConfigKind);
    d.decode = DecodeMigDeviceConfig;
    d.normalize = NormalizeMig;
    d.validate = ValidateMig;
    d.write_fields = WriteMig;
    d.upstream_admission_view = UpstreamViewMig;
    return config::DefineConfigKind(d);
  }();
  return kind;
}

const config::ConfigKind& VfioDeviceConfig::Kind() {
  static const config::ConfigKind kind = [] {
    auto d = GpuKindDefinition<VfioDeviceConfig>(kVfioDeviceConfigKind);
    d.decode = DecodeVfioDeviceConfig;
    d.normalize = NormalizeVfio;
    d.validate = ValidateVfio;
    d.write_fields = WriteVfio;
    d.upstream_admission_view = UpstreamViewVfio;
    return config::DefineConfigKind(d);
  }();
  return kind;
}

Status RegisterGpuConfigKinds() {
  NVDRA_RETURN_IF_ERROR(config::RegisterConfigKind(GpuConfig::Kind()));
  NVDRA_RETURN_IF_ERROR(config::RegisterConfigKind(MigDeviceConfig::Kind()));
  return config::RegisterConfigKind(VfioDeviceConfig::Kind());
}

}  // namespace nvdra::gpu
