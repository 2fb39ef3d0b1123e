#include "gpu/mig_edits.h"

#include "devices/nvcaps.h"

namespace nvdra::gpu {

Result<cdi::ContainerEdits> MigEdits(const GpuContainerEdits& edits, const devices::MigDeviceInfo& mig,
                                     const devices::GpuInfo* parent_gpu) {
  const devices::DeviceNodes& nodes = edits.nodes();
  cdi::ContainerEdits e;
  if (parent_gpu != nullptr) {
    NVDRA_ASSIGN_OR_RETURN(e, edits.FullGpu(*parent_gpu));
  } else {
    NVDRA_ASSIGN_OR_RETURN(auto parent, nodes.Existing("/dev/nvidia" + std::to_string(mig.parent_minor)));
    e.device_nodes.push_back(parent);
  }
  NVDRA_ASSIGN_OR_RETURN(auto gi, nodes.Capability(devices::MigGiAccessPath(mig.parent_minor, mig.gi_id)));
  NVDRA_ASSIGN_OR_RETURN(auto ci, nodes.Capability(devices::MigCiAccessPath(mig.parent_minor, mig.gi_id, mig.ci_id)));
  e.device_nodes.push_back(gi);
  e.device_nodes.push_back(ci);
  return e;
}

}  // namespace nvdra::gpu
