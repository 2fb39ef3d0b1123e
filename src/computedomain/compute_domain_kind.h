// The ComputeDomain device kind (driver compute-domain.nvidia.com): IMEX
// channels (channel-<id>) and the IMEX daemon device (daemon-0). Channels are
// held per id, so claims for different channels coexist on one node while a
// second claim for a held channel is refused.
//
// A channel claim labels this node for its domain (the label brings the
// domain's IMEX daemon here; NodeLabelManager), then waits inside the plugin,
// holding no lock, until the daemon reports this node Ready (DomainWatch);
// past the claim's deadline it fails with a retryable error that names what
// is missing. A daemon claim gets the domain's directory with the daemon
// config template (DomainDirectories).
#pragma once

#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "computedomain/compute_domain_checkpoint_codec.h"
#include "computedomain/compute_domain_config_kinds.h"
#include "computedomain/compute_domain_edits.h"
#include "computedomain/compute_domain_published_devices.h"
#include "computedomain/compute_domain_source.h"
#include "computedomain/compute_domain_undo.h"
#include "computedomain/domain_directory.h"
#include "computedomain/imex_mode.h"
#include "computedomain/node_label_manager.h"
#include "devices/device_info.h"
#include "driver/claims_view.h"
#include "driver/device_kind.h"
#include "ledger/claim_entry.h"
#include "util/mutex.h"

namespace nvdra::computedomain {

inline constexpr const char* kDriverName = "compute-domain.nvidia.com";

struct ComputeDomainKindOptions {
  std::string plugin_dir;  // <plugins dir>/compute-domain.nvidia.com (domains/ lives below)
  std::string clique_id;   // "<clusterUUID>.<cliqueId>" or "" without NVLink fabric
  // When set, the current clique (it changes when the fabric is
  // repartitioned); clique_id is then only the first value.
  std::function<std::string()> clique_source;
  int channels_to_publish = 1;  // upstream publishes channel-0 only
  // CDI id of the base spec's management device, returned for daemon
  // claims next to the claim's own device ("" when there is no base spec).
  std::string base_device_id;
  // Host-managed IMEX (--imex-mode=hostManaged): the node's administrator
  // runs nvidia-imex. A channel claim gets the channel it was allocated
  // (allocationMode is not looked at), is ready when `host_imex_ready`
  // says so (on a node with an NVLink clique), and labels nothing; daemon
  // claims are refused and the daemon device is not published.
  bool host_managed_imex = false;
  std::function<Status()> host_imex_ready;
};

// The device types this kind serves and the config kinds that apply to
// them: ComputeDomainDaemonConfig and ComputeDomainChannelConfig.
config::DriverConfigRules ComputeDomainConfigRules();

class ComputeDomainKind final : public driver::DeviceKind {
 public:
  // `labels` and `dirs` may be null (tests of the kind alone): no node label,
  // and a bare directory without a template.
  ComputeDomainKind(ComputeDomainKindOptions options, ComputeDomainEdits edits, ComputeDomainSource& domains,
                    NodeLabelManager* labels = nullptr, const DomainDirectories* dirs = nullptr);

  // A claim recorded before this process started (from the ledger): a
  // channel claim keeps holding the node label.
  // `devices`: the ledger's device names, for a record that names no domain
  // (a claim rebuilt from its CDI spec): a channel among them keeps the
  // node's label from being removed until the claim is unprepared.
  void Adopt(const std::string& claim_uid, const nlohmann::json& undo, const std::vector<std::string>& devices = {});
  // Sets the clique when no clique_source is given (new edits use it).
  void SetCliqueId(const std::string& clique_id);
  std::string clique_id() const;

  // Engine port.
  std::string driver_name() const override { return kDriverName; }
  std::string DeviceType(const std::string& device) const override;
  config::DriverConfigRules ConfigRules(const config::FeatureGates&) const override {
    return ComputeDomainConfigRules();
  }
  Result<driver::ClaimPlan> Plan(const driver::ClaimWork& work) override;
  Status CheckReady(const driver::ClaimWork& work, const driver::ClaimPlan& plan) override;
  // Channel claims wait for their IMEX daemon; daemon claims do not.
  bool MayWaitUntilReady(const driver::ClaimWork& work, const driver::ClaimPlan& plan) const override;
  Result<driver::PreparedClaim> Prepare(const driver::ClaimWork& work, const driver::ClaimPlan& plan) override;
  Result<driver::ClaimEdits> Edits(const nlohmann::json& undo,
                                   const std::vector<std::string>& prepared_devices) override;
  // "channel-3" holds "channel 3" (a spec alone does not say whether the
  // claim had every channel, allocationMode All); the daemon holds itself.
  const ledger::KindCodec& codec() const override { return codec_; }
  Status Unprepare(const std::string& claim_uid, const nlohmann::json& undo) override;

  // Publishing port (no hardware health: channels have none).
  std::vector<std::string> MetricDeviceTypes() const override;
  std::vector<model::PublishedDevice> PublishedDevices() const override;

  // The channel claims among the node's claims being or done being
  // prepared, not yet unprepared (what NodeLabelManager::SetSharedHolders
  // reads; a claim being unprepared holds no label): by their undo record's
  // domain, or, for a record that names none, as holders of an unknown
  // domain when a channel is among their devices.
  static LabelHolders LabelHoldersOf(const std::vector<driver::HeldClaim>& claims);

  // "channel-7" -> 7; nullopt for anything else.
  static std::optional<int> ChannelId(const std::string& device);

 private:
  ComputeDomainCheckpointCodec codec_;
  Result<driver::ClaimEdits> EditsFor(const ComputeDomainUndo& undo) const;
  std::string DomainDir(const std::string& domain_uid) const;
  Status CheckChannelReady(const driver::ClaimWork& work, const ComputeDomainUndo& undo);

  ComputeDomainKindOptions options_;
  ComputeDomainEdits edits_;
  ComputeDomainSource& domains_;
  NodeLabelManager* labels_;
  const DomainDirectories* dirs_;
  mutable Mutex clique_mu_;
  std::string clique_id_ GUARDED_BY(clique_mu_);
};

}  // namespace nvdra::computedomain
