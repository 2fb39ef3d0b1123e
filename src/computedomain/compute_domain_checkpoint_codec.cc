#include "computedomain/compute_domain_checkpoint_codec.h"

#include <algorithm>

#include "computedomain/compute_domain_kind.h"
#include "computedomain/compute_domain_undo.h"
#include "devices/device_names.h"
#include "ledger/go_json.h"

namespace nvdra::computedomain {
namespace {

using ledger::GoCheckpointedDevice;
using ledger::GoString;
using ledger::GoStringList;

constexpr const char* kChannelConfigKind = "ComputeDomainChannelConfig";
constexpr const char* kDaemonConfigKind = "ComputeDomainDaemonConfig";

// Whether the configs that apply to a channel's request ask for every
// channel (later configs take precedence, like upstream).
bool AllChannels(const std::vector<nlohmann::json>& config_parameters) {
  bool all = false;
  for (const auto& p : config_parameters) {
    if (ledger::GoStr(p, {"kind"}) != kChannelConfigKind) continue;
    all = ledger::GoStr(p, {"allocationMode"}) == "All";
  }
  return all;
}

bool IsComputeDomain(const ledger::ClaimEntry& e) {
  for (const auto& a : e.allocation) {
    if (a.driver == kDriverName) return true;
  }
  return false;
}

std::string DomainOf(const ledger::ClaimEntry& e) { return e.undo.is_object() ? e.undo.value("domainID", "") : ""; }

// The domain a device of an imported claim belongs to: its group's
// configState, else the configs that applied to its request (the oldest
// files have no configState).
std::string ImportedDomain(const ledger::UpstreamPreparedGroup& g, const ledger::UpstreamPreparedDevice& d,
                           const ledger::UpstreamClaim& claim) {
  std::string domain = g.config_state.is_object() ? ledger::GoStr(g.config_state, {"ComputeDomain"}) : "";
  if (!domain.empty()) return domain;
  for (const auto& r : d.device.requests) {
    for (const auto& p : claim.ParametersFor(r)) {
      std::string id = ledger::GoStr(p, {"domainID"});
      if (!id.empty()) domain = id;
    }
  }
  return domain;
}

bool AllChannelsOf(const ledger::UpstreamPreparedDevice& d, const ledger::UpstreamClaim& claim) {
  for (const auto& r : d.device.requests) {
    if (AllChannels(claim.ParametersFor(r))) return true;
  }
  return false;
}

}  // namespace

std::string ChannelResource(int id) { return "channel " + std::to_string(id); }

std::vector<std::string> HeldChannels(int id, bool all_channels) {
  if (!all_channels) return {ChannelResource(id)};
  std::vector<std::string> held;
  for (int i = 0; i < devices::kMaxImexChannels; ++i) held.push_back(ChannelResource(i));
  return held;
}

std::string ComputeDomainCheckpointCodec::driver_name() const { return kDriverName; }

std::string ComputeDomainCheckpointCodec::HeldByAnotherClaim(const std::string& resource, const std::string& holder,
                                                             const std::vector<std::string>& requested) const {
  return ledger::UpstreamHeldByAnotherClaim(resource, holder, requested);
}

std::vector<std::string> ComputeDomainCheckpointCodec::HeldResources(
    const std::string& device, const std::vector<nlohmann::json>& config_parameters) const {
  auto id = ComputeDomainKind::ChannelId(device);
  if (!id) return {device};
  return HeldChannels(*id, AllChannels(config_parameters));
}

// The compute-domain driver re-derives its undo from the configs: give it
// the domain this driver recorded.
std::string ComputeDomainCheckpointCodec::UpstreamConfigs(const ledger::ClaimEntry& e) const {
  std::string domain = DomainOf(e);
  if (domain.empty() || !IsComputeDomain(e)) return "";
  std::vector<std::string> channel_requests, daemon_requests;
  for (const auto& a : e.allocation) {
    if (ComputeDomainKind::ChannelId(a.device)) channel_requests.push_back(a.request);
    if (a.device.rfind("daemon-", 0) == 0) daemon_requests.push_back(a.request);
  }
  std::string configs;
  auto config = [&](const std::vector<std::string>& requests, const std::string& kind, bool all) {
    if (requests.empty()) return;
    if (!configs.empty()) configs += ",";
    configs += "{\"source\":\"FromClaim\",\"requests\":" + GoStringList(requests) +
               ",\"opaque\":{\"driver\":" + GoString(kDriverName) +
               ",\"parameters\":{\"apiVersion\":\"resource.nvidia.com/v1beta1\",\"kind\":" + GoString(kind) +
               ",\"domainID\":" + GoString(domain);
    if (kind == kChannelConfigKind) configs += std::string(",\"allocationMode\":") + (all ? "\"All\"" : "\"Single\"");
    configs += "}}}";
  };
  config(channel_requests, kChannelConfigKind, e.undo.value("allChannels", false));
  config(daemon_requests, kDaemonConfigKind, false);
  return configs;
}

std::optional<std::string> ComputeDomainCheckpointCodec::UpstreamPreparedDevices(const ledger::ClaimEntry& e) const {
  std::string domain = DomainOf(e);
  std::string out = "[";
  for (size_t i = 0; i < e.prepared.size(); ++i) {
    const auto& d = e.prepared[i];
    auto ch = ComputeDomainKind::ChannelId(d.device);
    std::string dev = ch ? "{\"channel\":{\"info\":{\"id\":" + std::to_string(*ch) +
                               "},\"device\":" + GoCheckpointedDevice(d) + "},\"daemon\":null}"
                         : "{\"channel\":null,\"daemon\":{\"info\":{\"id\":0},\"device\":" + GoCheckpointedDevice(d) +
                               "}}";
    out += (i ? "," : "") + std::string("{\"devices\":[") + dev +
           "],\"configState\":{\"Type\":" + GoString(ch ? "channel" : "daemon") +
           ",\"ComputeDomain\":" + GoString(domain) + "}}";
  }
  return out + "]";
}

nlohmann::json ComputeDomainCheckpointCodec::ImportUndo(const ledger::ClaimEntry& e,
                                                        const ledger::UpstreamClaim& claim) const {
  ComputeDomainUndo undo;
  for (const auto& g : claim.groups) {
    for (const auto& d : g.devices) {
      const std::string& name = d.device.device;
      bool channel = d.type == "channel" || (d.type.empty() && ComputeDomainKind::ChannelId(name));
      bool daemon = d.type == "daemon" || (d.type.empty() && name.rfind("daemon-", 0) == 0);
      if (!channel && !daemon) continue;
      if (undo.domain_id.empty()) undo.domain_id = ImportedDomain(g, d, claim);
      if (daemon) {
        undo.daemon = true;
        continue;
      }
      auto id = ComputeDomainKind::ChannelId(name);
      if (!id) continue;  // not a device name this kind publishes: nothing to hold or edit
      undo.channels.push_back({name, *id, nlohmann::json::object()});
      undo.all_channels = undo.all_channels || AllChannelsOf(d, claim);
    }
  }
  return EncodeComputeDomainUndo(undo);
}

}  // namespace nvdra::computedomain
