// Adapters from the Kubernetes client to the engine's ports: ResourceClaims
// for the claim engine and reconciler, ComputeDomains for the ComputeDomain
// plugin.
#pragma once

#include <string>

#include "computedomain/compute_domain_source.h"
#include "driver/claim_source.h"
#include "kube/kube_client.h"

namespace nvdra::plugin {

class KubeClaimSource final : public driver::ClaimSource {
 public:
  explicit KubeClaimSource(kube::KubeClient& client) : client_(client) {}
  Result<driver::ClaimSnapshot> Get(const std::string& ns, const std::string& name) override;
  Result<driver::ClaimSnapshot> GetUntil(const std::string& ns, const std::string& name,
                                         std::chrono::steady_clock::time_point deadline) override;

 private:
  kube::KubeClient& client_;
};

// Reads resource.nvidia.com/v1beta1 ComputeDomains. This node counts as
// ready in a domain when status.nodes has an entry with its name and status
// "Ready" (the upstream rule without the cliques gate).
class KubeComputeDomainSource final : public computedomain::ComputeDomainSource {
 public:
  KubeComputeDomainSource(kube::KubeClient& client, std::string node) : client_(client), node_(std::move(node)) {}
  Result<computedomain::ComputeDomainInfo> Get(const std::string& domain_uid) override;

 private:
  kube::KubeClient& client_;
  std::string node_;
};

// The snapshot the engine needs, from a decoded ResourceClaim.
driver::ClaimSnapshot ToSnapshot(const kube::ResourceClaim& claim);

}  // namespace nvdra::plugin
