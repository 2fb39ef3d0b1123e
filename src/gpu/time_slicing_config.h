// The time-slicing strategy's settings inside a GPU config's `sharing`
// (`timeSlicingConfig`, upstream's TimeSlicingConfig): the interval that
// `nvidia-smi compute-policy --set-timeslice` programs, with its default and
// rules, registered as a sharing settings block (sharing_config.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "gpu/gpu_config_kinds.h"
#include "gpu/sharing_config.h"

namespace nvdra::gpu {

inline constexpr std::string_view kTimeSlicingStrategy = "TimeSlicing";

// `nvidia-smi compute-policy --set-timeslice` takes the interval as 0..3.
enum class TimeSliceInterval { kDefault = 0, kShort = 1, kMedium = 2, kLong = 3 };
std::optional<TimeSliceInterval> ParseTimeSliceInterval(std::string_view name);
std::string_view TimeSliceIntervalName(TimeSliceInterval interval);

// The decoded value keeps what the user wrote, so that validation, not
// decoding, reports an unknown interval with upstream's message. Only whole
// GPUs are time-sliced one by one: only a GpuConfig has the block.
struct TimeSlicingConfig {
  std::optional<std::string> interval;
  static const SharingBlockKind& BlockKind();
  friend bool operator==(const TimeSlicingConfig&, const TimeSlicingConfig&) = default;
};

// The interval to program for a (normalized) time-slicing GpuConfig; none
// for another strategy.
std::optional<TimeSliceInterval> TimeSliceOf(const GpuConfig& config);

}  // namespace nvdra::gpu
