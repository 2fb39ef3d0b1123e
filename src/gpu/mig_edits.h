// What a container of a claim on a MIG device gets, for the static and the
// dynamic MIG types alike: its parent GPU's edits plus the GI and CI
// capability nodes, and the `type` name both publish their devices under.
#pragma once

#include <string_view>

#include "cdi/container_edits.h"
#include "devices/device_info.h"
#include "gpu/gpu_container_edits.h"
#include "util/status.h"

namespace nvdra::gpu {

// Upstream's published `type` of a MIG device (also in its errors and metrics).
inline constexpr std::string_view kDeviceTypeMig = "mig";

// The parent's edits (FullGpu of `parent` when given, else its
// /dev/nvidia<minor>) plus the GI and CI capability nodes.
Result<cdi::ContainerEdits> MigEdits(const GpuContainerEdits& edits, const devices::MigDeviceInfo& mig,
                                     const devices::GpuInfo* parent = nullptr);

}  // namespace nvdra::gpu
