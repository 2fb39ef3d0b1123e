#include "computedomain/compute_domain_kind.h"

#include <charconv>
#include <filesystem>
#include <set>

#include "devices/published_devices.h"
#include "util/file_util.h"
#include "util/log.h"

namespace nvdra::computedomain {

namespace {

std::string ChannelResource(int id) { return "channel " + std::to_string(id); }

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
  rules.device_types = {std::string(config::kDeviceTypeChannel), std::string(config::kDeviceTypeDaemon)};
  rules.defaults = {config::ComputeDomainDaemonConfig{}, config::ComputeDomainChannelConfig{}};
  return rules;
}

ComputeDomainKind::ComputeDomainKind(ComputeDomainKindOptions options, devices::DeviceEdits edits,
                                     ComputeDomainSource& domains)
    : options_(std::move(options)), edits_(std::move(edits)), domains_(domains) {}

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
  if (device == devices::kDaemonDeviceName) return std::string(config::kDeviceTypeDaemon);
  if (ChannelId(device)) return std::string(config::kDeviceTypeChannel);
  return "";
}

std::vector<std::string> ComputeDomainKind::MetricDeviceTypes() const {
  return {"channel", "daemon", "unknown"};
}

std::vector<model::PublishedDevice> ComputeDomainKind::PublishedDevices() const {
  return devices::ComputeDomainPublishedDevices(options_.channels_to_publish);
}

std::string ComputeDomainKind::DomainDir(const std::string& domain_uid) const {
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

Status PlanChannel(const config::ComputeDomainChannelConfig& ch, const config::ConfigGroup& group,
                   driver::ClaimPlan& plan, ComputeDomainUndo& undo) {
  if (group.results.size() != 1) {
    return InvalidArgument("a ComputeDomainChannelConfig applies to exactly one channel, got " +
                           std::to_string(group.results.size()) + " results");
  }
  NVDRA_RETURN_IF_ERROR(JoinDomain(undo.domain_id, ch.domain_id));
  const std::string& device = group.results[0].device;
  auto id = ComputeDomainKind::ChannelId(device);
  if (!id) return InvalidArgument("requested device is not allocatable: " + device);
  if (ch.allocation_mode == config::kAllocationModeAll) {
    undo.all_channels = true;
    for (int i = 0; i < devices::kMaxImexChannels; i++) plan.held.push_back(ChannelResource(i));
  } else {
    plan.held.push_back(ChannelResource(*id));
  }
  undo.channels.push_back({device, *id, nlohmann::json::object()});
  return Status::Ok();
}

Status PlanDaemon(const config::ComputeDomainDaemonConfig& d, const config::ConfigGroup& group,
                  const std::string& claim_uid, driver::ClaimPlan& plan, ComputeDomainUndo& undo) {
  if (group.results.size() != 1) return InvalidArgument("only expected 1 device for requests in claim " + claim_uid);
  NVDRA_RETURN_IF_ERROR(JoinDomain(undo.domain_id, d.domain_id));
  undo.daemon = true;
  plan.held.push_back(devices::kDaemonDeviceName);
  return Status::Ok();
}

}  // namespace

Result<driver::ClaimPlan> ComputeDomainKind::Plan(const driver::ClaimWork& work) {
  driver::ClaimPlan plan;
  ComputeDomainUndo undo;
  for (const auto& group : work.groups) {
    if (const auto* ch = std::get_if<config::ComputeDomainChannelConfig>(&group.config)) {
      NVDRA_RETURN_IF_ERROR(PlanChannel(*ch, group, plan, undo));
    } else if (const auto* d = std::get_if<config::ComputeDomainDaemonConfig>(&group.config)) {
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

Status ComputeDomainKind::CheckReady(const driver::ClaimWork& work, const driver::ClaimPlan& plan) {
  NVDRA_ASSIGN_OR_RETURN(ComputeDomainUndo undo, DecodeComputeDomainUndo(plan.undo));
  const std::string& domain = undo.domain_id;
  auto cd = domains_.Get(domain);
  if (!cd.ok()) {
    if (cd.status().code() == StatusCode::kNotFound) {
      return NotFound("error asserting ComputeDomain's namespace: ComputeDomain not found: " + domain);
    }
    return cd.status().Wrap("look up ComputeDomain " + domain);
  }
  bool has_channels = !undo.channels.empty();
  // Only channel claims must share the domain's namespace: daemon claims come
  // from the template the controller creates in the driver's namespace.
  if (has_channels && cd->ns != work.ns) {
    return FailedPrecondition(
        "error asserting ComputeDomain's namespace: the ResourceClaim's namespace is different than the "
        "ComputeDomain's namespace");
  }
  if (has_channels && !cd->node_ready) {
    return Unavailable("current node not ready in ComputeDomain " + cd->ns + "/" + cd->name +
                       " (its IMEX daemon is not Ready yet); the kubelet will retry");
  }
  return Status::Ok();
}

Result<driver::ClaimEdits> ComputeDomainKind::EditsFor(const ComputeDomainUndo& undo) const {
  driver::ClaimEdits out;
  if (undo.daemon && !options_.base_device_id.empty()) {
    out.shared_cdi_ids[devices::kDaemonDeviceName] = {options_.base_device_id};
  }
  if (options_.clique_id.empty()) return out;  // no fabric: nothing to inject
  for (const auto& ch : undo.channels) {
    cdi::ContainerEdits edits;
    if (undo.all_channels) {
      for (int i = 0; i < devices::kMaxImexChannels; i++) {
        NVDRA_ASSIGN_OR_RETURN(auto e, edits_.ImexChannelEdits(i));
        edits.Append(e);
      }
    } else {
      NVDRA_ASSIGN_OR_RETURN(edits, edits_.ImexChannelEdits(ch.id));
    }
    out.devices.push_back({ch.device, std::move(edits)});
  }
  if (undo.daemon) {
    cdi::ContainerEdits edits;
    edits.env = {"CLIQUE_ID=" + options_.clique_id, "COMPUTE_DOMAIN_UUID=" + undo.domain_id,
                 "COMPUTE_DOMAIN_NAME=" + undo.domain_name.value_or(""),
                 "COMPUTE_DOMAIN_NAMESPACE=" + undo.domain_namespace.value_or("")};
    edits.mounts.push_back({DomainDir(undo.domain_id), "/imexd", {"rw", "nosuid", "nodev", "bind"}, ""});
    NVDRA_ASSIGN_OR_RETURN(auto fabric, edits_.FabricImexMgmtEdits());
    edits.Append(fabric);
    out.devices.push_back({devices::kDaemonDeviceName, std::move(edits)});
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
    NVDRA_RETURN_IF_ERROR(MakeDirectories(DomainDir(undo.domain_id), 0755).Wrap("create IMEX daemon directory"));
  }
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
  if (!undo.ok()) {
    spdlog::warn("claim {}: skipping an undo record this version does not understand: {}", claim_uid,
                 undo.status().message());
    return Status::Ok();
  }
  if (!undo->daemon) return Status::Ok();
  const std::string& domain = undo->domain_id;
  if (!IsValidDomainId(domain)) {
    spdlog::warn("claim {}: undo record names no valid domain ({}); leaving the domain directory", claim_uid,
                 undo_json.dump());
    return Status::Ok();
  }
  std::error_code ec;
  std::filesystem::remove_all(DomainDir(domain), ec);
  if (ec) spdlog::warn("claim {}: remove {}: {}", claim_uid, DomainDir(domain), ec.message());
  return Status::Ok();
}

}  // namespace nvdra::computedomain
