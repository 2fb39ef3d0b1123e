// The GPU kind's KindCodec (ledger/kind_codec.h): its devices hold
// themselves (by name), and full GPUs are described to the Go driver's
// checkpoint.json as its "gpu" groups; MIG and VFIO devices cannot be.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ledger/kind_codec.h"

namespace nvdra::gpu {

class GpuCheckpointCodec final : public ledger::KindCodec {
 public:
  std::string driver_name() const override;
  std::vector<std::string> HeldResources(const std::string& device,
                                         const std::vector<nlohmann::json>& config_parameters) const override {
    return {device};
  }
  std::optional<std::string> UpstreamPreparedDevices(const ledger::ClaimEntry& e) const override;
};

}  // namespace nvdra::gpu
