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
  auto claim = client_.GetResourceClaim(ns, name);
  if (!claim.ok()) return claim.status();
  return ToSnapshot(*claim);
}

Result<computedomain::ComputeDomainInfo> KubeComputeDomainSource::Get(const std::string& domain_uid) {
  auto list = client_.ListJson("/apis/resource.nvidia.com/v1beta1/computedomains");
  if (!list.ok()) return list.status().Wrap("list ComputeDomains");
  const auto& items = (*list)["items"];
  if (!items.is_array()) return Unavailable("list ComputeDomains: response has no items");
  for (const auto& cd : items) {
    const auto& md = cd.value("metadata", nlohmann::json::object());
    if (md.value("uid", "") != domain_uid) continue;
    computedomain::ComputeDomainInfo info;
    info.uid = domain_uid;
    info.ns = md.value("namespace", "");
    info.name = md.value("name", "");
    const auto& status = cd.value("status", nlohmann::json::object());
    for (const auto& n : status.value("nodes", nlohmann::json::array())) {
      if (n.is_object() && n.value("name", "") == node_ && n.value("status", "") == "Ready") info.node_ready = true;
    }
    return info;
  }
  return NotFound("ComputeDomain not found: " + domain_uid);
}

}  // namespace nvdra::plugin
