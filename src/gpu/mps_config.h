// The MPS strategy's settings inside a config's `sharing` (`mpsConfig`,
// upstream's MpsConfig), of whole GPUs and MIG devices alike: the control
// daemon's defaults, with their rules, registered as a sharing settings
// block (sharing_config.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/quantity.h"
#include "gpu/sharing_config.h"
#include "util/status.h"

namespace nvdra::gpu {

inline constexpr std::string_view kMpsStrategy = "MPS";

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

  static const SharingBlockKind& BlockKind();
  friend bool operator==(const MpsConfig&, const MpsConfig&) = default;
};

}  // namespace nvdra::gpu
