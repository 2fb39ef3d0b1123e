#include "computedomain/compute_domain_undo.h"

#include <limits>

#include "driver/undo_record.h"

namespace nvdra::computedomain {

using nlohmann::json;

json EncodeComputeDomainUndo(const ComputeDomainUndo& undo) {
  json channels = json::array();
  for (const auto& c : undo.channels) {
    json item = {{"device", c.device}, {"id", c.id}};
    driver::undo::MergeUnknown(item, c.unknown);
    channels.push_back(std::move(item));
  }
  json j = {{"version", undo.version}, {"domainID", undo.domain_id}, {"channels", std::move(channels)},
            {"daemon", undo.daemon},   {"allChannels", undo.all_channels}};
  if (undo.domain_name) j["domainName"] = *undo.domain_name;
  if (undo.domain_namespace) j["domainNamespace"] = *undo.domain_namespace;
  driver::undo::MergeUnknown(j, undo.unknown);
  return j;
}

Result<ComputeDomainUndo> DecodeComputeDomainUndo(const json& j) {
  ComputeDomainUndo out;
  if (j.is_null()) return out;
  NVDRA_ASSIGN_OR_RETURN(auto f, driver::undo::Fields::Of(j, "ComputeDomain undo record"));
  NVDRA_ASSIGN_OR_RETURN(auto version, f.Int("version"));
  out.version = version.value_or(kComputeDomainUndoVersion);
  NVDRA_ASSIGN_OR_RETURN(auto domain, f.String("domainID"));
  out.domain_id = domain.value_or("");
  NVDRA_ASSIGN_OR_RETURN(auto daemon, f.Bool("daemon"));
  out.daemon = daemon.value_or(false);
  NVDRA_ASSIGN_OR_RETURN(auto all, f.Bool("allChannels"));
  out.all_channels = all.value_or(false);
  NVDRA_ASSIGN_OR_RETURN(out.domain_name, f.String("domainName"));
  NVDRA_ASSIGN_OR_RETURN(out.domain_namespace, f.String("domainNamespace"));
  NVDRA_ASSIGN_OR_RETURN(json channels, f.Array("channels"));
  for (const auto& item : channels) {
    NVDRA_ASSIGN_OR_RETURN(auto c, driver::undo::Fields::Of(item, "ComputeDomain undo record: channel"));
    NVDRA_ASSIGN_OR_RETURN(auto device, c.String("device"));
    NVDRA_ASSIGN_OR_RETURN(auto id, c.Int("id"));
    // The id is kept as an int: one past its range would not survive a
    // re-encode (it would come back negative and be refused then).
    if (!device || !id || *id < 0 || *id > std::numeric_limits<int>::max()) {
      return InvalidArgument("ComputeDomain undo record: channel needs a device and an id in 0.." +
                             std::to_string(std::numeric_limits<int>::max()) + ": " + item.dump());
    }
    out.channels.push_back({*device, static_cast<int>(*id), c.Unknown({"device", "id"})});
  }
  out.unknown = f.Unknown({"version", "domainID", "channels", "daemon", "allChannels", "domainName", "domainNamespace"});
  return out;
}

}  // namespace nvdra::computedomain
