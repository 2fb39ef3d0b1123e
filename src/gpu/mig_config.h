// MigDeviceConfig, the config kind of MIG devices (static and dynamic):
// upstream's shape, with a `sharing` whose settings blocks are those the
// strategies register for MIG devices (sharing_config.h), its defaults,
// rules and canonical JSON.
#pragma once

#include <optional>
#include <string_view>

#include "config/config_kind.h"
#include "gpu/sharing_config.h"

namespace nvdra::gpu {

inline constexpr std::string_view kMigDeviceConfigKind = "MigDeviceConfig";

// MIG devices cannot be time-sliced individually, so there is no
// timeSlicingConfig here (a strict decode refuses one).
using MigDeviceSharing = GpuSharing;

struct MigDeviceConfig {
  std::optional<MigDeviceSharing> sharing;

  bool Uses(std::string_view strategy) const { return sharing && sharing->strategy == strategy; }
  bool IsTimeSlicing() const { return Uses("TimeSlicing"); }
  bool IsMps() const { return Uses("MPS"); }

  static const config::ConfigKind& Kind();
  friend bool operator==(const MigDeviceConfig&, const MigDeviceConfig&) = default;
};

}  // namespace nvdra::gpu
