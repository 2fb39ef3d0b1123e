// The ComputeDomain device kind (driver compute-domain.nvidia.com): IMEX
// channels (channel-<id>) and the IMEX daemon device (daemon-0). Channels are
// held per id, so claims for different channels coexist on one node while a
// second claim for a held channel is refused. A channel claim waits (with a
// retryable error, never blocking other claims) until this node is ready in
// its ComputeDomain.
#pragma once

#include <optional>
#include <string>

#include "computedomain/compute_domain_source.h"
#include "computedomain/compute_domain_undo.h"
#include "devices/device_edits.h"
#include "devices/device_info.h"
#include "driver/device_kind.h"

namespace nvdra::computedomain {

inline constexpr const char* kDriverName = "compute-domain.nvidia.com";

struct ComputeDomainKindOptions {
  std::string plugin_dir;        // <plugins dir>/compute-domain.nvidia.com (domains/ lives below)
  std::string clique_id;         // "<clusterUUID>.<cliqueId>" or "" without NVLink fabric
  int channels_to_publish = 1;   // upstream publishes channel-0 only
  // CDI id of the base spec's management device, returned for daemon
  // claims next to the claim's own device ("" when there is no base spec).
  std::string base_device_id;
};

// The device types this kind serves and the config kinds that apply to
// them: ComputeDomainDaemonConfig and ComputeDomainChannelConfig.
config::DriverConfigRules ComputeDomainConfigRules();

class ComputeDomainKind final : public driver::DeviceKind {
 public:
  ComputeDomainKind(ComputeDomainKindOptions options, devices::DeviceEdits edits, ComputeDomainSource& domains);

  // Engine port.
  std::string driver_name() const override { return kDriverName; }
  std::string DeviceType(const std::string& device) const override;
  config::DriverConfigRules ConfigRules(const config::FeatureGates&) const override {
    return ComputeDomainConfigRules();
  }
  Result<driver::ClaimPlan> Plan(const driver::ClaimWork& work) override;
  Status CheckReady(const driver::ClaimWork& work, const driver::ClaimPlan& plan) override;
  Result<driver::PreparedClaim> Prepare(const driver::ClaimWork& work, const driver::ClaimPlan& plan) override;
  Result<driver::ClaimEdits> Edits(const nlohmann::json& undo,
                                   const std::vector<std::string>& prepared_devices) override;
  Status Unprepare(const std::string& claim_uid, const nlohmann::json& undo) override;

  // Publishing port (no hardware health: channels have none).
  std::vector<std::string> MetricDeviceTypes() const override;
  std::vector<model::PublishedDevice> PublishedDevices() const override;

  // "channel-7" -> 7; nullopt for anything else.
  static std::optional<int> ChannelId(const std::string& device);

 private:
  Result<driver::ClaimEdits> EditsFor(const ComputeDomainUndo& undo) const;
  std::string DomainDir(const std::string& domain_uid) const;

  ComputeDomainKindOptions options_;
  devices::DeviceEdits edits_;
  ComputeDomainSource& domains_;
};

}  // namespace nvdra::computedomain
