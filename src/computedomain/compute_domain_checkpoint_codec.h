// The compute-domain kind's KindCodec (ledger/kind_codec.h): what its
// devices hold in the ledger (channels per id, "channel <n>"; every channel
// for a ComputeDomainChannelConfig with allocationMode All) and how its
// claims are described in the Go driver's checkpoint.json (channel and
// daemon config states, the domain this driver recorded).
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
};

}  // namespace nvdra::computedomain
