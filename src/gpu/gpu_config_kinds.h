// The GPU kind's opaque config kinds, of gpu.nvidia.com and group/version
// `resource.nvidia.com/v1beta1`: GpuConfig, MigDeviceConfig and
// VfioDeviceConfig, their implied defaults, their rules (with upstream's
// messages) and their canonical JSON, defined here beside the kind and
// registered with the config decoder (config/config_kind.h) by
// RegisterGpuConfigKinds.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/opaque_config.h"
#include "config/quantity.h"
#include "util/status.h"

namespace nvdra::gpu {

inline constexpr std::string_view kGpuConfigKind = "GpuConfig";
inline constexpr std::string_view kMigDeviceConfigKind = "MigDeviceConfig";
inline constexpr std::string_view kVfioDeviceConfigKind = "VfioDeviceConfig";

inline constexpr std::string_view kTimeSlicingStrategy = "TimeSlicing";
inline constexpr std::string_view kMpsStrategy = "MPS";

// `nvidia-smi compute-policy --set-timeslice` takes the interval as 0..3.
enum class TimeSliceInterval { kDefault = 0, kShort = 1, kMedium = 2, kLong = 3 };
std::optional<TimeSliceInterval> ParseTimeSliceInterval(std::string_view name);
std::string_view TimeSliceIntervalName(TimeSliceInterval interval);

// Decoded values keep what the user wrote (strings stay strings) so that
// validation, not decoding, reports an unknown strategy or interval with
// upstream's message.
struct TimeSlicingConfig {
  std::optional<std::string> interval;
  friend bool operator==(const TimeSlicingConfig&, const TimeSlicingConfig&) = default;
};

struct MpsConfig {
  std::optional<int64_t> default_active_thread_percentage;
  std::optional<config::Quantity> default_pinned_device_memory_limit;
  // Keyed by device UUID or by index into the claim's sorted GPU UUIDs.
  std::map<std::string, config::Quantity> default_per_device_pinned_memory_limit;
  // The control daemon in multi-user mode (-M); Volta or newer only.
  std::optional<bool> multi_user;

  // Upstream's per-device limits for the given (sorted) UUIDs: the default
  // limit for every device, overridden per key; values as "<n>M".
  Result<std::map<std::string, std::string>> PinnedLimitsFor(const std::vector<std::string>& uuids) const;

  friend bool operator==(const MpsConfig&, const MpsConfig&) = default;
};

struct GpuSharing {
  std::string strategy;
  std::optional<TimeSlicingConfig> time_slicing_config;
  std::optional<MpsConfig> mps_config;
  friend bool operator==(const GpuSharing&, const GpuSharing&) = default;
};

struct GpuConfig {
  std::optional<GpuSharing> sharing;

  bool IsTimeSlicing() const { return sharing && sharing->strategy == kTimeSlicingStrategy; }
  bool IsMps() const { return sharing && sharing->strategy == kMpsStrategy; }
  // The interval to program, for a normalized time-slicing config.
  std::optional<TimeSliceInterval> TimeSlice() const;

  static const config::ConfigKind& Kind();
  friend bool operator==(const GpuConfig&, const GpuConfig&) = default;
};

// MIG devices cannot be time-sliced individually, so there is no
// timeSlicingConfig here (a strict decode rejects one).
struct MigDeviceSharing {
  std::string strategy;
  std::optional<MpsConfig> mps_config;
  friend bool operator==(const MigDeviceSharing&, const MigDeviceSharing&) = default;
};

struct MigDeviceConfig {
  std::optional<MigDeviceSharing> sharing;
  bool IsTimeSlicing() const { return sharing && sharing->strategy == kTimeSlicingStrategy; }
  bool IsMps() const { return sharing && sharing->strategy == kMpsStrategy; }
  static const config::ConfigKind& Kind();
  friend bool operator==(const MigDeviceConfig&, const MigDeviceConfig&) = default;
};

inline constexpr std::string_view kIommuLegacyOnly = "LegacyOnly";
inline constexpr std::string_view kIommuPreferIommuFD = "PreferIommuFD";

struct IommuConfig {
  std::string backend_policy;
  std::optional<bool> enable_api_device;
  friend bool operator==(const IommuConfig&, const IommuConfig&) = default;
};

struct VfioDeviceConfig {
  std::optional<IommuConfig> iommu;
  static const config::ConfigKind& Kind();
  friend bool operator==(const VfioDeviceConfig&, const VfioDeviceConfig&) = default;
};

// Registers the three kinds with the config decoder (GpuConfig,
// MigDeviceConfig, VfioDeviceConfig, in this order). Their rules are
// upstream's Normalize and Validate (plus: a timeSlicingConfig without an
// interval means "Default"), e.g. `"TimeSlicing" is selected as the GPU
// sharing strategy, but the "TimeSlicingSettings" feature gate is not
// enabled`; their validation errors are wrapped as "error validating GPU
// config", and upstream's admission webhook judges their driver's configs.
Status RegisterGpuConfigKinds();

}  // namespace nvdra::gpu
