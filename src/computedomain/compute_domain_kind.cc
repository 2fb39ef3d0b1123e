#include "computedomain/compute_domain_kind.h"

#include <charconv>
#include <filesystem>
#include <set>

#include "devices/device_names.h"
#include "util/file_util.h"
#include "util/log.h"

namespace nvdra::computedomain {

namespace {

bool IsValidDomainId(const std::string& id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

config::DriverConfigRules ComputeDomainConfigRules() {
  config::DriverConfigRules rules;
  rules.driver = kDriverName;
  rules.device_types = {{std::string(kDeviceTypeChannel), std::string(kComputeDomainChannelConfigKind)},
                        {std::string(kDeviceTypeDaemon), std::string(kComputeDomainDaemonConfigKind)}};
  rules.defaults = {ComputeDomainDaemonConfig{}, ComputeDomainChannelConfig{}};
  return rules;
}

ComputeDomainKind::ComputeDomainKind(ComputeDomainKindOptions options, ComputeDomainEdits edits,
                                     ComputeDomainSource& domains, NodeLabelManager* labels,
                                     const DomainDirectories* dirs)
    : options_(std::move(options)),
      edits_(std::move(edits)),
      domains_(domains),
      labels_(labels),
      dirs_(dirs),
      clique_id_(options_.clique_id) {
  // The decoder learns the kind's config kinds with the kind.
  if (Status st = RegisterComputeDomainConfigKinds(); !st.ok()) NVDRA_ERROR("{}", st.message());
}

void ComputeDomainKind::SetCliqueId(const std::string& clique_id) {
  MutexLock l(clique_mu_);
  clique_id_ = clique_id;
}

std::string ComputeDomainKind::clique_id() const {
  if (options_.clique_source) return options_.clique_source();
  MutexLock l(clique_mu_);
  return clique_id_;
}

void ComputeDomainKind::Adopt(const std::string& claim_uid, const nlohmann::json& undo_json,
                              const std::vector<std::string>& devices) {
  if (labels_ == nullptr) return;
  auto undo = DecodeComputeDomainUndo(undo_json);
  if (undo.ok() && !undo->channels.empty() && !undo->domain_id.empty()) {
    labels_->Adopt(undo->domain_id, claim_uid);
    return;
  }
  for (const auto& d : devices) {
    if (ChannelId(d)) {
      labels_->AdoptUnknownDomain(claim_uid);
      return;
    }
  }
}

LabelHolders ComputeDomainKind::LabelHoldersOf(const std::vector<driver::HeldClaim>& claims) {
  LabelHolders out;
  for (const auto& e : claims) {
    // A claim whose Unprepare has begun is on its way out: it no longer
    // keeps the label, so the last of several channel claims unprepared
    // together (by any plugin process of the node) removes it.
    if (e.state == driver::HoldState::kUnpreparing) continue;
    auto undo = DecodeComputeDomainUndo(e.undo);
    if (undo.ok() && !undo->domain_id.empty()) {
      if (!undo->channels.empty()) out.by_domain[undo->domain_id].insert(e.uid);
      continue;
    }
    bool channel = false;
    for (const auto& d : e.devices) channel = channel || ChannelId(d).has_value();
    for (const auto& a : e.allocation) channel = channel || ChannelId(a.device).has_value();
    if (channel) out.unknown_domain.insert(e.uid);
  }
  return out;
}

std::optional<int> ComputeDomainKind::ChannelId(const std::string& device) {
  constexpr std::string_view prefix = "channel-";
  if (device.size() <= prefix.size() || device.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  int id = -1;
  const char* b = device.data() + prefix.size();
  const char* e = device.data() + device.size();
  auto [p, ec] = std::from_chars(b, e, id);
  if (ec != std::errc() || p != e || id < 0 || id >= devices::kMaxImexChannels) return std::nullopt;
  if (std::to_string(id) != std::string(b, e)) return std::nullopt;  // no leading zeros
  return id;
}

std::string ComputeDomainKind::DeviceType(const std::string& device) const {
  if (device == kDaemonDeviceName) return std::string(kDeviceTypeDaemon);
  if (ChannelId(device)) return std::string(kDeviceTypeChannel);
  return "";
}

std::vector<std::string> ComputeDomainKind::MetricDeviceTypes() const { return {"channel", "daemon", "unknown"}; }

std::vector<model::PublishedDevice> ComputeDomainKind::PublishedDevices() const {
  return ComputeDomainPublishedDevices(options_.channels_to_publish, !options_.host_managed_imex);
}

std::string ComputeDomainKind::DomainDir(const std::string& domain_uid) const {
  if (dirs_ != nullptr) return dirs_->Dir(domain_uid);
  return JoinPath(JoinPath(options_.plugin_dir, "domains"), domain_uid);
}

namespace {

// The domain a config names, checked against the one the claim named so far.
Status JoinDomain(std::string& domain, const std::string& config_domain) {
  if (!IsValidDomainId(config_domain)) return InvalidArgument("domainID \"" + config_domain + "\" is not a valid UID");
  if (!domain.empty() && domain != config_domain) {
    return InvalidArgument("claim mixes ComputeDomains " + domain + " and " + config_domain);
  }
  domain = config_domain;
  return Status::Ok();
}

Status PlanChannel(const ComputeDomainChannelConfig& ch, const config::ConfigGroup& group, bool host_managed,
                   driver::ClaimPlan& plan, ComputeDomainUndo& undo) {
  if (group.results.size() != 1) {
    return InvalidArgument("a ComputeDomainChannelConfig applies to exactly one channel, got " +
                           std::to_string(group.results.size()) + " results");
  }
  NVDRA_RETURN_IF_ERROR(JoinDomain(undo.domain_id, ch.domain_id));
  const std::string& device = group.results[0].device;
  auto id = ComputeDomainKind::ChannelId(device);
  if (!id) return InvalidArgument("requested device is not allocatable: " + device);
  // Host-managed IMEX hands out the allocated channel alone, whatever the
  // config's allocationMode says (upstream).
  const bool all = !host_managed && ch.allocation_mode == kAllocationModeAll;
  if (all) undo.all_channels = true;
  for (auto& r : HeldChannels(*id, all)) plan.held.push_back(std::move(r));
  undo.channels.push_back({device, *id, nlohmann::json::object()});
  return Status::Ok();
}

Status PlanDaemon(const ComputeDomainDaemonConfig& d, const config::ConfigGroup& group, const std::string& claim_uid,
                  driver::ClaimPlan& plan, ComputeDomainUndo& undo) {
  if (group.results.size() != 1) return InvalidArgument("only expected 1 device for requests in claim " + claim_uid);
  NVDRA_RETURN_IF_ERROR(JoinDomain(undo.domain_id, d.domain_id));
  undo.daemon = true;
  plan.held.push_back(kDaemonDeviceName);
  return Status::Ok();
}

}  // namespace

Result<driver::ClaimPlan> ComputeDomainKind::Plan(const driver::ClaimWork& work) {
  driver::ClaimPlan plan;
  ComputeDomainUndo undo;
  for (const auto& group : work.groups) {
    if (const auto* ch = group.config.As<ComputeDomainChannelConfig>()) {
      NVDRA_RETURN_IF_ERROR(PlanChannel(*ch, group, options_.host_managed_imex, plan, undo));
    } else if (const auto* d = group.config.As<ComputeDomainDaemonConfig>()) {
      // No daemon runs for a domain when the host runs nvidia-imex: a
      // daemon claim is a stale or hand-made object (upstream).
      if (options_.host_managed_imex) return InvalidArgument(kDaemonClaimsNotSupportedHostManaged).AsPermanent();
      NVDRA_RETURN_IF_ERROR(PlanDaemon(*d, group, work.uid, plan, undo));
    }
  }
  for (const auto& r : work.results) {
    bool covered = false;
    for (const auto& g : work.groups) {
      for (const auto& gr : g.results) covered |= gr.device == r.device && gr.request == r.request;
    }
    if (!covered) return InvalidArgument("no ComputeDomain config applies to device " + r.device);
  }
  plan.undo = EncodeComputeDomainUndo(undo);
  return plan;
}

bool ComputeDomainKind::MayWaitUntilReady(const driver::ClaimWork&, const driver::ClaimPlan& plan) const {
  auto undo = DecodeComputeDomainUndo(plan.undo);
  return undo.ok() && !undo->channels.empty();
}

Status ComputeDomainKind::CheckReady(const driver::ClaimWork& work, const driver::ClaimPlan& plan) {
  NVDRA_ASSIGN_OR_RETURN(ComputeDomainUndo undo, DecodeComputeDomainUndo(plan.undo));
  if (!undo.channels.empty()) return CheckChannelReady(work, undo);
  // Daemon claims come from the template the controller creates in the
  // driver's namespace; upstream asks nothing of their domain up front.
  auto cd = domains_.Get(undo.domain_id);
  if (!cd.ok() && cd.status().code() == StatusCode::kNotFound) {
    return NotFound("error asserting ComputeDomain's namespace: ComputeDomain not found: " + undo.domain_id);
  }
  return cd.ok() ? Status::Ok() : cd.status().Wrap("look up ComputeDomain " + undo.domain_id);
}

// The upstream order: the domain and its namespace, the node label (which
// is what brings the domain's IMEX daemon to this node), then readiness.
Status ComputeDomainKind::CheckChannelReady(const driver::ClaimWork& work, const ComputeDomainUndo& undo) {
  using Steady = std::chrono::steady_clock;
  const std::string& domain = undo.domain_id;
  // Leave time to answer the kubelet before its own deadline.
  const Steady::time_point deadline = work.deadline - std::chrono::milliseconds(500);
  auto cd = domains_.Get(domain);
  if (!cd.ok() && cd.status().code() == StatusCode::kNotFound) {
    // A domain created a moment ago may not have reached the watch yet.
    cd = domains_.WaitReady(domain, std::min(deadline, Steady::now() + std::chrono::seconds(2)));
  }
  if (!cd.ok()) {
    if (cd.status().code() == StatusCode::kNotFound) {
      return NotFound("error asserting ComputeDomain's namespace: ComputeDomain not found: " + domain);
    }
    return cd.status().Wrap("look up ComputeDomain " + domain);
  }
  if (cd->ns != work.ns) {
    return FailedPrecondition(
        "error asserting ComputeDomain's namespace: the ResourceClaim's namespace is different than the "
        "ComputeDomain's namespace");
  }
  if (options_.host_managed_imex) {
    // No label, no daemon of the domain to wait for: the host's daemon
    // serves every domain. Without an NVLink clique the claim gets no
    // channel node and needs nothing of it (upstream).
    if (clique_id().empty() || !options_.host_imex_ready) return Status::Ok();
    return options_.host_imex_ready().Wrap("host nvidia-imex daemon readiness check failed");
  }
  if (labels_ != nullptr) NVDRA_RETURN_IF_ERROR(labels_->Acquire(domain, work.uid));
  if (cd->node_ready) return Status::Ok();
  auto start = Steady::now();
  NVDRA_INFO("claim {}: waiting for this node to become ready in ComputeDomain {}/{}: {}", work.uid, cd->ns, cd->name,
             cd->not_ready);
  cd = domains_.WaitReady(domain, deadline);
  if (!cd.ok()) return cd.status().Wrap("wait for ComputeDomain " + domain);
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - start);
  if (cd->node_ready) {
    NVDRA_INFO("claim {}: this node is ready in ComputeDomain {}/{} after {} ms", work.uid, cd->ns, cd->name,
               waited.count());
    return Status::Ok();
  }
  return Unavailable("current node not ready in ComputeDomain " + cd->ns + "/" + cd->name + ": " +
                     (cd->not_ready.empty() ? "its IMEX daemon is not Ready" : cd->not_ready) + " (waited " +
                     std::to_string(waited.count()) + " ms); the kubelet will retry");
}

Result<driver::ClaimEdits> ComputeDomainKind::EditsFor(const ComputeDomainUndo& undo) const {
  driver::ClaimEdits out;
  if (undo.daemon && !options_.base_device_id.empty()) {
    out.shared_cdi_ids[kDaemonDeviceName] = {options_.base_device_id};
  }
  const std::string clique = clique_id();
  // Without an NVLink fabric a channel needs no device node (upstream).
  for (const auto& ch : clique.empty() ? std::vector<ChannelUndo>{} : undo.channels) {
    cdi::ContainerEdits edits;
    if (undo.all_channels) {
      for (int i = 0; i < devices::kMaxImexChannels; i++) {
        NVDRA_ASSIGN_OR_RETURN(auto e, edits_.Channel(i));
        edits.Append(e);
      }
    } else {
      NVDRA_ASSIGN_OR_RETURN(edits, edits_.Channel(ch.id));
    }
    out.devices.push_back({ch.device, std::move(edits)});
  }
  if (undo.daemon) {
    cdi::ContainerEdits edits;
    // The daemon's env and /imexd also on nodes without a clique (upstream);
    // only the fabric-imex-mgmt node needs the fabric.
    edits.env = {"CLIQUE_ID=" + clique, "COMPUTE_DOMAIN_UUID=" + undo.domain_id,
                 "COMPUTE_DOMAIN_NAME=" + undo.domain_name.value_or(""),
                 "COMPUTE_DOMAIN_NAMESPACE=" + undo.domain_namespace.value_or("")};
    edits.mounts.push_back({DomainDir(undo.domain_id), "/imexd", {"rw", "nosuid", "nodev", "bind"}, ""});
    if (!clique.empty()) {
      NVDRA_ASSIGN_OR_RETURN(auto fabric, edits_.FabricImexMgmt());
      edits.Append(fabric);
    }
    out.devices.push_back({kDaemonDeviceName, std::move(edits)});
  }
  return out;
}

Result<driver::PreparedClaim> ComputeDomainKind::Prepare(const driver::ClaimWork& work, const driver::ClaimPlan& plan) {
  NVDRA_ASSIGN_OR_RETURN(ComputeDomainUndo undo, DecodeComputeDomainUndo(plan.undo));
  if (undo.daemon) {
    auto cd = domains_.Get(undo.domain_id);
    if (cd.ok()) {
      undo.domain_name = cd->name;
      undo.domain_namespace = cd->ns;
    }
    if (dirs_ != nullptr) {
      NVDRA_RETURN_IF_ERROR(dirs_->Prepare(undo.domain_id));
    } else {
      NVDRA_RETURN_IF_ERROR(MakeDirectories(DomainDir(undo.domain_id), 0755).Wrap("create IMEX daemon directory"));
    }
  }
  if (!undo.channels.empty() && labels_ != nullptr) labels_->Confirm(undo.domain_id, work.uid);
  driver::PreparedClaim out;
  NVDRA_ASSIGN_OR_RETURN(out.edits, EditsFor(undo));
  out.undo = EncodeComputeDomainUndo(undo);
  return out;
}

Result<driver::ClaimEdits> ComputeDomainKind::Edits(const nlohmann::json& undo_json,
                                                    const std::vector<std::string>& /*prepared_devices*/) {
  NVDRA_ASSIGN_OR_RETURN(ComputeDomainUndo undo, DecodeComputeDomainUndo(undo_json));
  return EditsFor(undo);
}

Status ComputeDomainKind::Unprepare(const std::string& claim_uid, const nlohmann::json& undo_json) {
  auto undo = DecodeComputeDomainUndo(undo_json);
  if (driver::SkipUnreadableUndo(claim_uid, undo.status())) return Status::Ok();
  // The last channel claim of the domain takes the node label away (never
  // fails: a removal the API server did not take is retried by the
  // maintenance pass).
  if (labels_ != nullptr) labels_->Forget(claim_uid);
  if (!undo->channels.empty() && labels_ != nullptr) labels_->Release(undo->domain_id, claim_uid);
  // A daemon's directory stays: the daemon of a live domain may come back to
  // this node. The maintenance pass removes directories of deleted domains,
  // as upstream's periodic cleanup does.
  return Status::Ok();
}

}  // namespace nvdra::computedomain
