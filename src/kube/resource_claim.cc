#include "kube/resource_claim.h"

#include <nlohmann/json.hpp>

#include "kube/raw_json.h"
#include "util/json_reader.h"

namespace nvdra::kube {
namespace {

using nlohmann::json;

// Any shape error fails the whole decode: the claim cannot be trusted, and
// a claim with fewer devices than were allocated must never come out.

Result<DeviceRequestAllocationResult> DecodeResult(const JsonReader& r) {
  DeviceRequestAllocationResult res;
  // The API server requires all four; without them the result names no
  // device and must not be read as "nothing allocated".
  for (auto [key, field] : {std::pair{"request", &res.request}, std::pair{"driver", &res.driver},
                            std::pair{"pool", &res.pool}, std::pair{"device", &res.device}}) {
    NVDRA_ASSIGN_OR_RETURN(*field, r.Required<std::string>(key));
    if (field->empty()) return r.Field(key).Invalid("must not be empty");
  }
  NVDRA_ASSIGN_OR_RETURN(res.admin_access, r.OptionalOr<bool>("adminAccess", false));
  NVDRA_ASSIGN_OR_RETURN(res.share_id, r.OptionalOr<std::string>("shareID", ""));
  NVDRA_ASSIGN_OR_RETURN(auto consumed, r.OptionalObject("consumedCapacity"));
  if (consumed) {
    // Quantities are strings on the wire ("4Gi"); they are parsed where
    // they are counted (the GPU kind's plan), with the quantity grammar.
    for (const auto& [name, value] : consumed->value().items()) {
      NVDRA_ASSIGN_OR_RETURN(res.consumed_capacity[name], consumed->Required<std::string>(name));
    }
  }
  return res;
}

// Config `index` of status.allocation.devices; `text` is the whole claim,
// where the opaque parameters are found verbatim.
Result<DeviceAllocationConfiguration> DecodeConfig(const JsonReader& r, std::string_view text, size_t index) {
  DeviceAllocationConfiguration out;
  NVDRA_ASSIGN_OR_RETURN(out.source, r.OptionalOr<std::string>("source", ""));
  NVDRA_ASSIGN_OR_RETURN(out.requests, r.OptionalOr<std::vector<std::string>>("requests", {}));
  NVDRA_ASSIGN_OR_RETURN(auto opaque, r.OptionalObject("opaque"));
  if (opaque) {
    OpaqueDeviceConfig o;
    NVDRA_ASSIGN_OR_RETURN(o.driver, opaque->OptionalOr<std::string>("driver", ""));
    auto raw = FindRawJson(text, {"status", "allocation", "devices", "config", index, "opaque", "parameters"});
    o.parameters = raw ? std::string(*raw) : "";
    out.opaque = std::move(o);
  }
  return out;
}

Status DecodeDevices(const JsonReader& devices, std::string_view text, ResourceClaim& c) {
  NVDRA_RETURN_IF_ERROR(devices.ForEach("results", [&](const JsonReader& item) -> Status {
    NVDRA_ASSIGN_OR_RETURN(auto res, DecodeResult(item));
    c.results.push_back(std::move(res));
    return Status::Ok();
  }));
  return devices.ForEach("config", [&](const JsonReader& item) -> Status {
    NVDRA_ASSIGN_OR_RETURN(auto cfg, DecodeConfig(item, text, c.configs.size()));
    c.configs.push_back(std::move(cfg));
    return Status::Ok();
  });
}

Status DecodeMetadata(const JsonReader& r, ResourceClaim& c) {
  NVDRA_ASSIGN_OR_RETURN(c.api_version, r.OptionalOr<std::string>("apiVersion", ""));
  NVDRA_ASSIGN_OR_RETURN(auto meta, r.OptionalObject("metadata"));
  if (!meta) return Status::Ok();
  NVDRA_ASSIGN_OR_RETURN(c.namespace_name, meta->OptionalOr<std::string>("namespace", ""));
  NVDRA_ASSIGN_OR_RETURN(c.name, meta->OptionalOr<std::string>("name", ""));
  NVDRA_ASSIGN_OR_RETURN(c.uid, meta->OptionalOr<std::string>("uid", ""));
  NVDRA_ASSIGN_OR_RETURN(c.resource_version, meta->OptionalOr<std::string>("resourceVersion", ""));
  // Best effort: only device metadata reads it, and a malformed annotation
  // must not keep the claim from being decoded.
  auto annotations = meta->OptionalObject("annotations");
  if (annotations.ok() && annotations->has_value()) {
    auto pod_claim = (*annotations)->Optional<std::string>("resource.kubernetes.io/pod-claim-name");
    if (pod_claim.ok()) c.pod_claim_name = *pod_claim;
  }
  return Status::Ok();
}

Status DecodeStatus(const JsonReader& r, std::string_view text, ResourceClaim& c) {
  NVDRA_ASSIGN_OR_RETURN(auto status, r.OptionalObject("status"));
  if (!status) return Status::Ok();
  if (auto raw = FindRawJson(text, {"status"})) c.status_json = std::string(*raw);
  NVDRA_ASSIGN_OR_RETURN(auto alloc, status->OptionalObject("allocation"));
  if (alloc) {
    c.allocated = true;
    NVDRA_ASSIGN_OR_RETURN(auto devices, alloc->OptionalObject("devices"));
    if (devices) NVDRA_RETURN_IF_ERROR(DecodeDevices(*devices, text, c));
  }
  return status->ForEach("reservedFor", [&](const JsonReader& item) -> Status {
    ResourceClaimConsumerReference ref;
    NVDRA_ASSIGN_OR_RETURN(ref.api_group, item.OptionalOr<std::string>("apiGroup", ""));
    NVDRA_ASSIGN_OR_RETURN(ref.resource, item.OptionalOr<std::string>("resource", ""));
    NVDRA_ASSIGN_OR_RETURN(ref.name, item.OptionalOr<std::string>("name", ""));
    NVDRA_ASSIGN_OR_RETURN(ref.uid, item.OptionalOr<std::string>("uid", ""));
    c.reserved_for.push_back(std::move(ref));
    return Status::Ok();
  });
}

}  // namespace

Result<ResourceClaim> DecodeResourceClaim(std::string_view text) {
  if (auto claim = DecodeResourceClaimFast(text)) return std::move(*claim);
  return DecodeResourceClaimTree(text);
}

Result<ResourceClaim> DecodeResourceClaimTree(std::string_view text) {
  // The kind, read off the text before it is parsed: an answer of another
  // kind costs one scan, not a parse of all it holds.
  if (auto raw = FindRawJson(text, {std::string("kind")});
      raw && raw->size() >= 2 && raw->front() == '"' && *raw != "\"ResourceClaim\"") {
    return InvalidArgument("expected kind ResourceClaim, got " + std::string(raw->substr(0, 100)));
  }
  NVDRA_ASSIGN_OR_RETURN(json j, ParseJsonText(text, "ResourceClaim"));
  if (!j.is_object()) return InvalidArgument("ResourceClaim is not a JSON object");
  JsonReader r(j);
  ResourceClaim c;
  auto kind = r.Optional<std::string>("kind");
  // A kind that is present names this type; null included, as before.
  if (kind.ok() && j.contains("kind") && kind->value_or("") != "ResourceClaim") {
    return InvalidArgument("expected kind ResourceClaim, got " + kind->value_or(""));
  }
  Status s = kind.status();
  if (s.ok()) s = DecodeMetadata(r, c);
  if (s.ok()) s = DecodeStatus(r, text, c);
  if (!s.ok()) return s.Wrap("ResourceClaim " + c.namespace_name + "/" + c.name + " has an unexpected shape");
  return c;
}

}  // namespace nvdra::kube
