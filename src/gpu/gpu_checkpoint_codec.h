// The GPU kind's KindCodec (ledger/kind_codec.h): its devices hold
// themselves (by name), and full GPUs are described to the Go driver's
// checkpoint.json as its "gpu" groups; MIG and VFIO devices cannot be. An
// imported claim's undo record names the full GPUs whose time slice the Go
// driver set, so Unprepare resets them as it would have.
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
  // DeviceConfigState as each release marshals it (docs/migration.md):
  // mpsControlDaemonID always written up to v0.4.1 and omitempty since, then
  // timeSliceApplied (v0.4.1 on) and mpsApplied (main) when set.
  std::string UpstreamConfigState(std::string_view raw, ledger::UpstreamRelease release) const override;
  nlohmann::json ImportUndo(const ledger::ClaimEntry& e, const ledger::UpstreamClaim& claim) const override;
  // A share per allocation result with a share id (admin access aside), its
  // consumedCapacity parsed as Kubernetes quantities; an amount that does
  // not parse is kept as the largest one, so the share still takes room
  // rather than making it.
  std::vector<ledger::HeldShare> ImportShares(const ledger::ClaimEntry& e) const override;
  // A requested device another claim holds is refused in upstream's words
  // (its overlap check, validateNoOverlappingPreparedDevices): "requested
  // device <name> is already allocated to different claim <uid>". Upstream
  // has no words for what nvdra checks beyond it (a memory slice two MIG
  // placements share, the PCI function a GPU and its passthrough twin
  // share): those keep the ledger's sentence, which names the resource.
  std::string HeldByAnotherClaim(const std::string& resource, const std::string& holder,
                                 const std::vector<std::string>& requested) const override;
};

}  // namespace nvdra::gpu
