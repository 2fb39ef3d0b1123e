#include "computedomain/compute_domain_kind.h"

#include <charconv>
#include <filesystem>
#include <set>

#include "devices/published_devices.h"
#include "metrics/dra_metrics.h"
#include "util/file_util.h"
#include "util/log.h"

namespace nvdra::computedomain {

namespace {

constexpr int kUndoVersion = 1;

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

ComputeDomainKind::ComputeDomainKind(ComputeDomainKindOptions options, devices::DeviceEdits edits,
                                     ComputeDomainSource& domains, const cdi::CdiSpecWriter& cdi)
    : options_(std::move(options)), edits_(std::move(edits)), domains_(domains), cdi_(cdi) {}

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
  if (device == devices::kDaemonDeviceName) return "daemon";
  if (ChannelId(device)) return "channel";
  return "";
}

std::vector<std::string> ComputeDomainKind::MetricDeviceTypes() const {
  return metrics::kComputeDomainDeviceTypes;
}

std::vector<model::PublishedDevice> ComputeDomainKind::PublishedDevices() const {
  return devices::ComputeDomainPublishedDevices(options_.channels_to_publish);
}

std::string ComputeDomainKind::DomainDir(const std::string& domain_uid) const {
  return JoinPath(JoinPath(options_.plugin_dir, "domains"), domain_uid);
}

Result<driver::ClaimPlan> ComputeDomainKind::Plan(const driver::ClaimWork& work) {
  driver::ClaimPlan plan;
  nlohmann::json channels = nlohmann::json::array();
  std::string domain;
  bool daemon = false;
  bool all = false;
  for (const auto& group : work.groups) {
    if (const auto* ch = std::get_if<config::ComputeDomainChannelConfig>(&group.config)) {
      if (group.results.size() != 1) {
        return InvalidArgument("a ComputeDomainChannelConfig applies to exactly one channel, got " +
                               std::to_string(group.results.size()) + " results");
      }
      if (!IsValidDomainId(ch->domain_id)) return InvalidArgument("domainID \"" + ch->domain_id + "\" is not a valid UID");
      if (!domain.empty() && domain != ch->domain_id) {
        return InvalidArgument("claim mixes ComputeDomains " + domain + " and " + ch->domain_id);
      }
      domain = ch->domain_id;
      auto id = ChannelId(group.results[0].device);
      if (!id) return InvalidArgument("requested device is not allocatable: " + group.results[0].device);
      if (ch->allocation_mode == config::kAllocationModeAll) {
        all = true;
        for (int i = 0; i < devices::kMaxImexChannels; i++) plan.held.push_back(ChannelResource(i));
      } else {
        plan.held.push_back(ChannelResource(*id));
      }
      channels.push_back({{"device", group.results[0].device}, {"id", *id}});
    } else if (const auto* d = std::get_if<config::ComputeDomainDaemonConfig>(&group.config)) {
      if (group.results.size() != 1) {
        return InvalidArgument("only expected 1 device for requests in claim " + work.uid);
      }
      if (!IsValidDomainId(d->domain_id)) return InvalidArgument("domainID \"" + d->domain_id + "\" is not a valid UID");
      if (!domain.empty() && domain != d->domain_id) {
        return InvalidArgument("claim mixes ComputeDomains " + domain + " and " + d->domain_id);
      }
      domain = d->domain_id;
      daemon = true;
      plan.held.push_back(devices::kDaemonDeviceName);
    }
  }
  for (const auto& r : work.results) {
    bool covered = false;
    for (const auto& g : work.groups) {
      for (const auto& gr : g.results) covered |= gr.device == r.device && gr.request == r.request;
    }
    if (!covered) return InvalidArgument("no ComputeDomain config applies to device " + r.device);
  }
  plan.undo = {{"version", kUndoVersion}, {"domainID", domain}, {"channels", channels}, {"daemon", daemon},
               {"allChannels", all}};
  return plan;
}

Status ComputeDomainKind::CheckReady(const driver::ClaimWork& work, const driver::ClaimPlan& plan) {
  std::string domain = plan.undo.value("domainID", "");
  auto cd = domains_.Get(domain);
  if (!cd.ok()) {
    if (cd.status().code() == StatusCode::kNotFound) {
      return NotFound("error asserting ComputeDomain's namespace: ComputeDomain not found: " + domain);
    }
    return cd.status().Wrap("look up ComputeDomain " + domain);
  }
  bool has_channels = !plan.undo.value("channels", nlohmann::json::array()).empty();
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

Result<cdi::Spec> ComputeDomainKind::BuildSpec(const std::string& uid, const nlohmann::json& undo,
                                               const std::vector<ledger::PreparedDevice>& devices) const {
  std::vector<cdi::SpecDevice> devs;
  if (options_.clique_id.empty()) return cdi::Spec{cdi_.Kind(), {}, {}};  // no fabric: nothing to inject
  bool all = undo.value("allChannels", false);
  for (const auto& ch : undo.value("channels", nlohmann::json::array())) {
    cdi::ContainerEdits edits;
    if (all) {
      for (int i = 0; i < devices::kMaxImexChannels; i++) {
        NVDRA_ASSIGN_OR_RETURN(auto e, edits_.ImexChannelEdits(i));
        edits.Append(e);
      }
    } else {
      NVDRA_ASSIGN_OR_RETURN(edits, edits_.ImexChannelEdits(ch.value("id", 0)));
    }
    devs.push_back({ch.value("device", ""), std::move(edits)});
  }
  if (undo.value("daemon", false)) {
    std::string domain = undo.value("domainID", "");
    cdi::ContainerEdits edits;
    edits.env = {"CLIQUE_ID=" + options_.clique_id, "COMPUTE_DOMAIN_UUID=" + domain,
                 "COMPUTE_DOMAIN_NAME=" + undo.value("domainName", ""),
                 "COMPUTE_DOMAIN_NAMESPACE=" + undo.value("domainNamespace", "")};
    edits.mounts.push_back({DomainDir(domain), "/imexd", {"rw", "nosuid", "nodev", "bind"}, ""});
    NVDRA_ASSIGN_OR_RETURN(auto fabric, edits_.FabricImexMgmtEdits());
    edits.Append(fabric);
    devs.push_back({devices::kDaemonDeviceName, std::move(edits)});
  }
  (void)devices;
  return cdi_.BuildClaimSpec(uid, devs);
}

Result<driver::PreparedClaim> ComputeDomainKind::Prepare(const driver::ClaimWork& work, const driver::ClaimPlan& plan,
                                                         const nlohmann::json& previous_undo) {
  driver::PreparedClaim out;
  out.undo = plan.undo;
  if (plan.undo.value("daemon", false)) {
    std::string domain = plan.undo.value("domainID", "");
    auto cd = domains_.Get(domain);
    if (cd.ok()) {
      out.undo["domainName"] = cd->name;
      out.undo["domainNamespace"] = cd->ns;
    }
    NVDRA_RETURN_IF_ERROR(MakeDirectories(DomainDir(domain), 0755).Wrap("create IMEX daemon directory"));
  }
  NVDRA_ASSIGN_OR_RETURN(out.spec, BuildSpec(work.uid, out.undo, {}));
  std::set<std::string> with_edits;
  for (const auto& d : out.spec.devices) with_edits.insert(d.name);
  for (const auto& r : work.results) {
    ledger::PreparedDevice d;
    d.requests = {r.request};
    d.pool = r.pool;
    d.device = r.device;
    if (with_edits.count(cdi::CdiSpecWriter::ClaimDeviceName(work.uid, r.device))) {
      d.cdi_device_ids = {cdi_.DeviceId(work.uid, r.device)};
    }
    if (r.device == devices::kDaemonDeviceName && !options_.base_device_id.empty()) {
      d.cdi_device_ids.push_back(options_.base_device_id);
    }
    d.share_id = r.share_id;
    out.devices.push_back(std::move(d));
  }
  return out;
}

Result<cdi::Spec> ComputeDomainKind::RebuildSpec(const ledger::ClaimEntry& entry) {
  return BuildSpec(entry.uid, entry.undo, entry.prepared);
}

Status ComputeDomainKind::Unprepare(const ledger::ClaimEntry& entry) {
  const nlohmann::json& undo = entry.undo;
  if (!undo.is_object()) return Status::Ok();
  // Typed look-ups: value() throws on a field of another type, and a record
  // this version cannot parse must be skipped, not crash every retry.
  auto daemon = undo.find("daemon");
  auto domain_id = undo.find("domainID");
  if (daemon != undo.end() && daemon->is_boolean() && daemon->get<bool>()) {
    std::string domain = domain_id != undo.end() && domain_id->is_string() ? domain_id->get<std::string>() : "";
    if (!IsValidDomainId(domain)) {
      spdlog::warn("claim {}: undo record names no valid domain ({}); leaving the domain directory", entry.uid,
                   undo.dump());
    } else {
      std::error_code ec;
      std::filesystem::remove_all(DomainDir(domain), ec);
      if (ec) spdlog::warn("claim {}: remove {}: {}", entry.uid, DomainDir(domain), ec.message());
    }
  }
  return Status::Ok();
}

}  // namespace nvdra::computedomain
