// Where the ComputeDomain plugin learns about ComputeDomains (the
// resource.nvidia.com/v1beta1 custom resource): its name and namespace for a
// domain UID, and whether this node is ready in it. The production
// implementation reads the API server; tests use an in-memory one.
#pragma once

#include <string>

#include "util/status.h"

namespace nvdra::computedomain {

struct ComputeDomainInfo {
  std::string uid, ns, name;
  bool node_ready = false;  // this node's IMEX daemon reports Ready
};

class ComputeDomainSource {
 public:
  virtual ~ComputeDomainSource() = default;
  // kNotFound when no ComputeDomain has that UID; kUnavailable on API errors.
  virtual Result<ComputeDomainInfo> Get(const std::string& domain_uid) = 0;
};

}  // namespace nvdra::computedomain
