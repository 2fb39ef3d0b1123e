// Where the GPU kind's config pieces are registered: the sharing strategies'
// settings blocks (in upstream's order of strategies, which is also their
// order in canonical JSON), then GpuConfig and the device types' config
// kinds. Like gpu_undo_pieces.cc, a registry that names the plug-ins; it
// sits in the config kinds' own library so the webhook links it without
// the kind.
#include "gpu/gpu_config_kinds.h"
#include "gpu/mig_config.h"
#include "gpu/mps_config.h"
#include "gpu/time_slicing_config.h"
#include "gpu/vfio_config.h"

namespace nvdra::gpu {

Status RegisterGpuConfigKinds() {
  NVDRA_RETURN_IF_ERROR(RegisterSharingBlock(TimeSlicingConfig::BlockKind()));
  NVDRA_RETURN_IF_ERROR(RegisterSharingBlock(MpsConfig::BlockKind()));
  NVDRA_RETURN_IF_ERROR(config::RegisterConfigKind(GpuConfig::Kind()));
  NVDRA_RETURN_IF_ERROR(config::RegisterConfigKind(MigDeviceConfig::Kind()));
  return config::RegisterConfigKind(VfioDeviceConfig::Kind());
}

}  // namespace nvdra::gpu
