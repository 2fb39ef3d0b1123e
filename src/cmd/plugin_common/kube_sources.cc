#include "cmd/plugin_common/kube_sources.h"

namespace nvdra::plugin {

driver::ClaimSnapshot ToSnapshot(const kube::ResourceClaim& claim) {
  driver::ClaimSnapshot s;
  s.uid = claim.uid;
  s.ns = claim.namespace_name;
  s.name = claim.name;
  s.allocated = claim.allocated;
  for (const auto& r : claim.results) {
    s.results.push_back({r.request, r.driver, r.pool, r.device, r.admin_access, r.share_id.value_or("")});
  }
  for (const auto& c : claim.reserved_for) s.consumers.push_back(c.uid);
  // Class configs come first: precedence is class < claim, later beats earlier.
  for (int pass = 0; pass < 2; pass++) {
    for (const auto& c : claim.configs) {
      bool from_class = c.source == "FromClass";
      if ((pass == 0) != from_class) continue;
      config::ClaimConfig cc;
      cc.source = from_class ? config::ConfigSource::kFromClass : config::ConfigSource::kFromClaim;
      cc.requests = c.requests;
      if (c.opaque) {
        cc.driver = c.opaque->driver;
        cc.parameters_json = c.opaque->parameters;
      } else {
        cc.opaque = false;
      }
      s.configs.push_back(std::move(cc));
    }
  }
  return s;
}

Result<driver::ClaimSnapshot> KubeClaimSource::Get(const std::string& ns, const std::string& name) {
  return GetUntil(ns, name, kube::kNoDeadline);
}

Result<driver::ClaimSnapshot> KubeClaimSource::GetUntil(const std::string& ns, const std::string& name,
                                                        std::chrono::steady_clock::time_point deadline) {
  auto claim = client_.GetResourceClaim(ns, name, deadline);
  if (!claim.ok()) return claim.status();
  return ToSnapshot(*claim);
}

namespace {

// Typed look-ups: value() throws on null or on a field of another type, and
// a ComputeDomain whose status is null or half-written must read as "not
// ready", not crash the plugin inside a kubelet call.
const nlohmann::json* Member(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string StringMember(const nlohmann::json& j, const char* key) {
  const nlohmann::json* v = Member(j, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : "";
}

}  // namespace

Result<computedomain::ComputeDomainInfo> KubeComputeDomainSource::Get(const std::string& domain_uid) {
  auto list = client_.ListJson("/apis/resource.nvidia.com/v1beta1/computedomains");
  if (!list.ok()) return list.status().Wrap("list ComputeDomains");
  const nlohmann::json* items = Member(*list, "items");
  if (items == nullptr || !items->is_array()) return Unavailable("list ComputeDomains: response has no items");
  for (const auto& cd : *items) {
    const nlohmann::json* md = Member(cd, "metadata");
    if (md == nullptr || StringMember(*md, "uid") != domain_uid) continue;
    computedomain::ComputeDomainInfo info;
    info.uid = domain_uid;
    info.ns = StringMember(*md, "namespace");
    info.name = StringMember(*md, "name");
    const nlohmann::json* status = Member(cd, "status");
    const nlohmann::json* nodes = status != nullptr ? Member(*status, "nodes") : nullptr;
    if (nodes != nullptr && nodes->is_array()) {
      for (const auto& n : *nodes) {
        if (StringMember(n, "name") == node_ && StringMember(n, "status") == "Ready") info.node_ready = true;
      }
    }
    return info;
  }
  return NotFound("ComputeDomain not found: " + domain_uid);
}

}  // namespace nvdra::plugin
