// The adapter from the Kubernetes client to the engine's claim port:
// ResourceClaims for the claim engine and the reconciler.
#pragma once

#include <string>

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

// The snapshot the engine needs, from a decoded ResourceClaim.
driver::ClaimSnapshot ToSnapshot(const kube::ResourceClaim& claim);

}  // namespace nvdra::plugin
