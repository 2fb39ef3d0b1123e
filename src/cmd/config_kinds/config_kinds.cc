#include "cmd/config_kinds/config_kinds.h"

#include "computedomain/compute_domain_config_kinds.h"
#include "gpu/gpu_config_kinds.h"

namespace nvdra {

Status RegisterNvdraConfigKinds() {
  NVDRA_RETURN_IF_ERROR(gpu::RegisterGpuConfigKinds());
  return computedomain::RegisterComputeDomainConfigKinds();
}

}  // namespace nvdra
