#include "cmd/plugin_common/kube_sources.h"

namespace nvdra::plugin {

driver::ClaimSnapshot ToSnapshot(const kube::ResourceClaim& claim) {
  driver::ClaimSnapshot s;
  s.uid = claim.uid;
  s.ns = claim.namespace_name;
  s.name = claim.name;
  s.allocated = claim.allocated;
  s.results = claim.results;
  s.pod_claim_name = claim.pod_claim_name;
  for (const auto& c : claim.reserved_for) s.consumers.push_back(c.uid);
  // Class configs come first: precedence is class < claim, later beats
  // earlier. A source of neither kind goes with the claim's, for the
  // resolver to refuse.
  for (int pass = 0; pass < 2; pass++) {
    for (const auto& c : claim.configs) {
      const config::ConfigSource source = config::ParseConfigSource(c.source);
      if ((pass == 0) != (source == config::ConfigSource::kFromClass)) continue;
      config::ClaimConfig cc;
      cc.source = source;
      cc.source_name = c.source;
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

}  // namespace nvdra::plugin
