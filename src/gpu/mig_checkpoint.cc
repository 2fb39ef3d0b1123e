// MIG's part of the Go driver's checkpoint: a MIG device cannot be
// described to it (its groups need facts this driver does not record), and
// a whole GPU's PreparedDevice carries an empty "mig" member.
#include "gpu/gpu_handlers.h"

namespace nvdra::gpu {

CheckpointPiece MigCheckpointPiece() {
  CheckpointPiece p;
  p.undescribable = [](const std::string& device) { return device.find("-mig-") != std::string::npos; };
  p.whole_gpu_members = ",\"mig\":null";
  return p;
}

}  // namespace nvdra::gpu
