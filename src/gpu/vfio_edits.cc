#include "gpu/vfio_edits.h"

namespace nvdra::gpu {

Result<cdi::ContainerEdits> VfioEdits(const GpuContainerEdits& edits, int iommu_group, bool iommufd,
                                      const std::string& cdev) {
  cdi::ContainerEdits e;
  if (iommufd) {
    if (!cdev.starts_with("vfio")) return FailedPrecondition("missing iommufd cdev for the GPU");
    NVDRA_ASSIGN_OR_RETURN(auto n, edits.nodes().Existing("/dev/vfio/devices/" + cdev));
    e.device_nodes.push_back(n);
    return e;
  }
  NVDRA_ASSIGN_OR_RETURN(auto n, edits.nodes().Existing("/dev/vfio/" + std::to_string(iommu_group)));
  e.device_nodes.push_back(n);
  return e;
}

Result<cdi::ContainerEdits> VfioCommonEdits(const GpuContainerEdits& edits, bool enable_api_device, bool iommufd) {
  cdi::ContainerEdits e;
  // So that the NVIDIA container runtime does not act on it beside CDI.
  e.env.push_back("NVIDIA_VISIBLE_DEVICES=void");
  if (!enable_api_device) return e;
  NVDRA_ASSIGN_OR_RETURN(auto n, edits.nodes().Existing(iommufd ? "/dev/iommu" : "/dev/vfio/vfio"));
  e.device_nodes.push_back(n);
  return e;
}

}  // namespace nvdra::gpu
