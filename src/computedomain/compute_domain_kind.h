// The ComputeDomain device kind (driver compute-domain.nvidia.com): IMEX
// channels (channel-<id>) and the IMEX daemon device (daemon-0). Channels are
// held per id, so claims for different channels coexist on one node while a
// second claim for a held channel is refused. A channel claim waits (with a
// retryable error, never blocking other claims) until this node is ready in
// its ComputeDomain.
#pragma once

#include <optional>
#include <string>

#include "cdi/cdi_spec_writer.h"
#include "computedomain/compute_domain_source.h"
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

class ComputeDomainKind final : public driver::DeviceKind {
 public:
  ComputeDomainKind(ComputeDomainKindOptions options, devices::DeviceEdits edits, ComputeDomainSource& domains,
                    const cdi::CdiSpecWriter& cdi);

  std::string driver_name() const override { return kDriverName; }
  std::string DeviceType(const std::string& device) const override;
  std::vector<std::string> MetricDeviceTypes() const override;
  std::vector<model::PublishedDevice> PublishedDevices() const override;
  Result<driver::ClaimPlan> Plan(const driver::ClaimWork& work) override;
  Status CheckReady(const driver::ClaimWork& work, const driver::ClaimPlan& plan) override;
  Result<driver::PreparedClaim> Prepare(const driver::ClaimWork& work, const driver::ClaimPlan& plan,
                                        const nlohmann::json& previous_undo) override;
  Result<cdi::Spec> RebuildSpec(const ledger::ClaimEntry& entry) override;
  Status Unprepare(const ledger::ClaimEntry& entry) override;

  // "channel-7" -> 7; nullopt for anything else.
  static std::optional<int> ChannelId(const std::string& device);

 private:
  Result<cdi::Spec> BuildSpec(const std::string& uid, const nlohmann::json& undo,
                              const std::vector<ledger::PreparedDevice>& devices) const;
  std::string DomainDir(const std::string& domain_uid) const;

  ComputeDomainKindOptions options_;
  devices::DeviceEdits edits_;
  ComputeDomainSource& domains_;
  const cdi::CdiSpecWriter& cdi_;
};

}  // namespace nvdra::computedomain
