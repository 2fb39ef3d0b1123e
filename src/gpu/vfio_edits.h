// What a container of a passthrough (VFIO) claim gets, as upstream's vfio
// CDI handler gives it: the GPU's VFIO node instead of the NVIDIA ones, and
// claim-wide edits of its own in place of GpuContainerEdits::Common; and
// the `type` name passthrough devices are published under.
#pragma once

#include <string>
#include <string_view>

#include "cdi/container_edits.h"
#include "gpu/gpu_container_edits.h"
#include "util/status.h"

namespace nvdra::gpu {

// Upstream's published `type` of a GPU passed through (also in its errors
// and metrics).
inline constexpr std::string_view kDeviceTypeVfio = "vfio";

// The GPU's IOMMU group's /dev/vfio/<group>, or with `iommufd` its
// /dev/vfio/devices/<cdev> (vfio<N>).
Result<cdi::ContainerEdits> VfioEdits(const GpuContainerEdits& edits, int iommu_group, bool iommufd,
                                      const std::string& cdev);
// What a passthrough claim's containers share instead of Common():
// NVIDIA_VISIBLE_DEVICES=void and, when the API device is asked for,
// /dev/iommu (iommufd) or /dev/vfio/vfio.
Result<cdi::ContainerEdits> VfioCommonEdits(const GpuContainerEdits& edits, bool enable_api_device, bool iommufd);

}  // namespace nvdra::gpu
