// The compute-domain kind's KindCodec (ledger/kind_codec.h): what its
// devices hold in the ledger (channels per id, "channel <n>"; every channel
// for a ComputeDomainChannelConfig with allocationMode All) and how its
// claims are described in the Go driver's checkpoint.json (channel and
// daemon config states, the domain this driver recorded). An imported
// claim's undo record names its domain, channels and daemon as the kind's
// Plan would, so the node label and CDI edits of a claim the Go driver
// prepared are kept like those of one this driver prepared.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ledger/kind_codec.h"

namespace nvdra::computedomain {

// The ledger resource of IMEX channel `id`.
std::string ChannelResource(int id);
// What a claim on channel `id` holds: that channel, or every channel for
// allocationMode All. The kind's Plan and the codec both name holds so.
std::vector<std::string> HeldChannels(int id, bool all_channels);

class ComputeDomainCheckpointCodec final : public ledger::KindCodec {
 public:
  std::string driver_name() const override;
  std::vector<std::string> HeldResources(const std::string& device,
                                         const std::vector<nlohmann::json>& config_parameters) const override;
  std::string UpstreamConfigs(const ledger::ClaimEntry& e) const override;
  std::optional<std::string> UpstreamPreparedDevices(const ledger::ClaimEntry& e) const override;
  nlohmann::json ImportUndo(const ledger::ClaimEntry& e, const ledger::UpstreamClaim& claim) const override;
  // Upstream's compute-domain plugin has two checks and two sentences. Its
  // checkpoint check (assertImexChannelNotAllocated) compares channel ids:
  // "channel <id> already allocated by claim <uid> (according to
  // checkpoint)". Its overlap check (validateNoOverlappingPreparedDevices)
  // compares allocated device names: "requested device <name> is already
  // allocated to different claim <uid>". Our channel resources
  // ("channel <id>", every id for allocationMode All) are ids, so their
  // refusal is the checkpoint check's; a resource that is a requested
  // device's own name (the daemon device) is the overlap check's.
  std::string HeldByAnotherClaim(const std::string& resource, const std::string& holder,
                                 const std::vector<std::string>& requested) const override;
};

}  // namespace nvdra::computedomain
