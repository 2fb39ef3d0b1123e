// Where the engine reads ResourceClaims from. The production implementation
// wraps the Kubernetes client (kube/); tests use an in-memory one. Keeping the
// port this small lets the reconciler and the engine share it.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "config/config_resolver.h"
#include "model/claim.h"
#include "util/status.h"

namespace nvdra::driver {

// A ResourceClaim as the API server has it now, reduced to what the engine
// and the reconciler read.
struct ClaimSnapshot {
  std::string uid, ns, name;
  bool allocated = false;
  std::vector<model::AllocationResult> results;  // all drivers
  std::vector<config::ClaimConfig> configs;      // allocation configs, class ones first
  std::vector<std::string> consumers;            // status.reservedFor UIDs
  // The resource.kubernetes.io/pod-claim-name annotation: the pod's name
  // for a claim made from a ResourceClaimTemplate (device metadata files
  // are found by it inside the container).
  std::optional<std::string> pod_claim_name;
};

class ClaimSource {
 public:
  virtual ~ClaimSource() = default;
  // kNotFound when the claim does not exist; kUnavailable (retryable) for
  // transport errors. The caller compares UIDs.
  virtual Result<ClaimSnapshot> Get(const std::string& ns, const std::string& name) = 0;
  // The same, giving up at `deadline` (the kubelet's deadline for the claim)
  // with a retryable error (kDeadlineExceeded) instead of retrying a slow or
  // throttling API server past it. Sources without retries of their own
  // need not override it.
  virtual Result<ClaimSnapshot> GetUntil(const std::string& ns, const std::string& name,
                                         std::chrono::steady_clock::time_point deadline) {
    (void)deadline;
    return Get(ns, name);
  }
};

}  // namespace nvdra::driver
