#include "config/opaque_config.h"

#include <algorithm>
#include <charconv>

#include <nlohmann/json.hpp>

namespace nvdra::config {
namespace {

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

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
  return InvalidArgument("unknown GPU sharing strategy: " + s +
                         ", supported GPU sharing strategies: TimeSlicing, MPS");
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
  if (c.default_pinned_device_memory_limit) j["defaultPinnedDeviceMemoryLimit"] = c.default_pinned_device_memory_limit->text();
  if (!c.default_per_device_pinned_memory_limit.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, q] : c.default_per_device_pinned_memory_limit) m[k] = q.text();
    j["defaultPerDevicePinnedMemoryLimit"] = std::move(m);
  }
  return j;
}

nlohmann::ordered_json Header(std::string_view kind) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["kind"] = kind;
  j["apiVersion"] = kApiVersion;
  return j;
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

std::string_view KindOf(const Config& config) {
  return std::visit(Overloaded{
                        [](const GpuConfig&) { return kGpuConfigKind; },
                        [](const MigDeviceConfig&) { return kMigDeviceConfigKind; },
                        [](const VfioDeviceConfig&) { return kVfioDeviceConfigKind; },
                        [](const ComputeDomainChannelConfig&) { return kComputeDomainChannelConfigKind; },
                        [](const ComputeDomainDaemonConfig&) { return kComputeDomainDaemonConfigKind; },
                    },
                    config);
}

void Normalize(Config& config, const FeatureGates& gates) {
  std::visit(Overloaded{
                 [&](GpuConfig& c) {
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
                 },
                 [&](MigDeviceConfig& c) {
                   if (!c.sharing) return;
                   if (gates.Enabled(Gate::kMPSSupport) && c.sharing->strategy == kMpsStrategy && !c.sharing->mps_config) {
                     c.sharing->mps_config.emplace();
                   }
                 },
                 [&](VfioDeviceConfig& c) {
                   if (!c.iommu) c.iommu.emplace();
                   if (c.iommu->backend_policy.empty()) c.iommu->backend_policy = std::string(kIommuLegacyOnly);
                   if (!c.iommu->enable_api_device) c.iommu->enable_api_device = false;
                 },
                 [&](ComputeDomainChannelConfig& c) {
                   if (c.allocation_mode.empty()) c.allocation_mode = std::string(kAllocationModeSingle);
                 },
                 [&](ComputeDomainDaemonConfig&) {},
             },
             config);
}

Status Validate(const Config& config, const FeatureGates& gates) {
  return std::visit(
      Overloaded{
          [&](const GpuConfig& c) { return c.sharing ? ValidateGpuSharing(*c.sharing, gates) : Status::Ok(); },
          [&](const MigDeviceConfig& c) { return c.sharing ? ValidateMigSharing(*c.sharing, gates) : Status::Ok(); },
          [&](const VfioDeviceConfig& c) {
            if (!c.iommu) return Status::Ok();
            const std::string& p = c.iommu->backend_policy;
            if (p == kIommuLegacyOnly || p == kIommuPreferIommuFD) return Status::Ok();
            return InvalidArgument("unknown IOMMU backend policy: " + p +
                                   ", supported IOMMU backend policies: LegacyOnly, PreferIommuFD");
          },
          [&](const ComputeDomainChannelConfig& c) {
            if (c.domain_id.empty()) return InvalidArgument("domainID cannot be empty");
            // Upstream leaves this to the ComputeDomain CRD's enum, which
            // does not cover configs written into claims by hand.
            const std::string& m = c.allocation_mode;
            if (m.empty() || m == kAllocationModeSingle || m == kAllocationModeAll) return Status::Ok();
            return InvalidArgument("unknown allocationMode: " + m + ", supported allocation modes: Single, All");
          },
          [&](const ComputeDomainDaemonConfig& c) {
            if (c.domain_id.empty()) return InvalidArgument("domainID cannot be empty");
            return Status::Ok();
          },
      },
      config);
}

std::string ToCanonicalJson(const Config& config) {
  nlohmann::ordered_json j = Header(KindOf(config));
  std::visit(Overloaded{
                 [&](const GpuConfig& c) {
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
                 },
                 [&](const MigDeviceConfig& c) {
                   if (!c.sharing) return;
                   nlohmann::ordered_json s = nlohmann::ordered_json::object();
                   s["strategy"] = c.sharing->strategy;
                   if (c.sharing->mps_config) s["mpsConfig"] = MpsToJson(*c.sharing->mps_config);
                   j["sharing"] = std::move(s);
                 },
                 [&](const VfioDeviceConfig& c) {
                   if (!c.iommu) return;
                   nlohmann::ordered_json i = nlohmann::ordered_json::object();
                   i["backendPolicy"] = c.iommu->backend_policy;
                   if (c.iommu->enable_api_device) i["enableAPIDevice"] = *c.iommu->enable_api_device;
                   j["iommu"] = std::move(i);
                 },
                 [&](const ComputeDomainChannelConfig& c) {
                   j["domainID"] = c.domain_id;
                   if (!c.allocation_mode.empty()) j["allocationMode"] = c.allocation_mode;
                 },
                 [&](const ComputeDomainDaemonConfig& c) { j["domainID"] = c.domain_id; },
             },
             config);
  return j.dump();
}

}  // namespace nvdra::config
