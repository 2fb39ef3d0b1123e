#include "computedomain/compute_domain_undo.h"

#include <limits>

#include "util/json_reader.h"

namespace nvdra::computedomain {

using nlohmann::json;

json EncodeComputeDomainUndo(const ComputeDomainUndo& undo) {
  json channels = json::array();
  for (const auto& c : undo.channels) {
    json item = {{"device", c.device}, {"id", c.id}};
    MergeUnknownMembers(item, c.unknown);
    channels.push_back(std::move(item));
  }
  json j = {{"version", undo.version},
            {"domainID", undo.domain_id},
            {"channels", std::move(channels)},
            {"daemon", undo.daemon},
            {"allChannels", undo.all_channels}};
  if (undo.domain_name) j["domainName"] = *undo.domain_name;
  if (undo.domain_namespace) j["domainNamespace"] = *undo.domain_namespace;
  MergeUnknownMembers(j, undo.unknown);
  return j;
}

namespace {

Status DecodeChannel(const JsonReader& c, ComputeDomainUndo& out) {
  NVDRA_ASSIGN_OR_RETURN(auto device, c.Optional<std::string>("device"));
  NVDRA_ASSIGN_OR_RETURN(auto id, c.Optional<int64_t>("id"));
  // The id is kept as an int: one past its range would not survive a
  // re-encode (it would come back negative and be refused then).
  if (!device || !id || *id < 0 || *id > std::numeric_limits<int>::max()) {
    return c.Invalid("a channel needs a device and an id in 0.." + std::to_string(std::numeric_limits<int>::max()) +
                     ": " + c.value().dump());
  }
  out.channels.push_back({*device, static_cast<int>(*id), c.Unknown({"device", "id"})});
  return Status::Ok();
}

Status DecodeInto(const JsonReader& r, ComputeDomainUndo& out) {
  NVDRA_RETURN_IF_ERROR(r.ExpectObject());
  NVDRA_ASSIGN_OR_RETURN(out.version, r.OptionalOr<int64_t>("version", kComputeDomainUndoVersion));
  NVDRA_ASSIGN_OR_RETURN(out.domain_id, r.OptionalOr<std::string>("domainID", ""));
  NVDRA_ASSIGN_OR_RETURN(out.daemon, r.OptionalOr<bool>("daemon", false));
  NVDRA_ASSIGN_OR_RETURN(out.all_channels, r.OptionalOr<bool>("allChannels", false));
  NVDRA_ASSIGN_OR_RETURN(out.domain_name, r.Optional<std::string>("domainName"));
  NVDRA_ASSIGN_OR_RETURN(out.domain_namespace, r.Optional<std::string>("domainNamespace"));
  NVDRA_RETURN_IF_ERROR(r.ForEach("channels", [&](const JsonReader& c) { return DecodeChannel(c, out); }));
  out.unknown = r.Unknown({"version", "domainID", "channels", "daemon", "allChannels", "domainName",
                           "domainNamespace"});
  return Status::Ok();
}

}  // namespace

Result<ComputeDomainUndo> DecodeComputeDomainUndo(const json& j) {
  ComputeDomainUndo out;
  if (j.is_null()) return out;
  NVDRA_RETURN_IF_ERROR(DecodeInto(JsonReader(j), out).Wrap("ComputeDomain undo record"));
  return out;
}

}  // namespace nvdra::computedomain
