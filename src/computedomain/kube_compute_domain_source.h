// The ComputeDomain plugin's ComputeDomainSource over the Kubernetes client:
// reads resource.nvidia.com/v1beta1 ComputeDomains. This node counts as
// ready in a domain when status.nodes has an entry with its name and status
// "Ready" (the upstream rule without the cliques gate).
#pragma once

#include <string>

#include "computedomain/compute_domain_source.h"
#include "kube/kube_client.h"

namespace nvdra::computedomain {

class KubeComputeDomainSource final : public ComputeDomainSource {
 public:
  KubeComputeDomainSource(kube::KubeClient& client, std::string node) : client_(client), node_(std::move(node)) {}
  Result<ComputeDomainInfo> Get(const std::string& domain_uid) override;

 private:
  kube::KubeClient& client_;
  std::string node_;
};

}  // namespace nvdra::computedomain
