// The typed subset of a resource.k8s.io ResourceClaim that a node plugin
// needs. v1, v1beta2 and v1beta1 all decode into this one struct.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/claim.h"
#include "util/status.h"

namespace nvdra::kube {

// status.allocation.devices.results[]: the one model of a result.
using DeviceRequestAllocationResult = model::AllocationResult;

struct OpaqueDeviceConfig {
  std::string driver;
  // The parameters exactly as the API server sent them (raw JSON text): the
  // driver decodes them strictly later, and the ledger may keep them verbatim.
  std::string parameters;
  friend bool operator==(const OpaqueDeviceConfig&, const OpaqueDeviceConfig&) = default;
};

struct DeviceAllocationConfiguration {
  std::string source;                 // "FromClass" | "FromClaim"
  std::vector<std::string> requests;  // empty: applies to all requests
  std::optional<OpaqueDeviceConfig> opaque;
  friend bool operator==(const DeviceAllocationConfiguration&, const DeviceAllocationConfiguration&) = default;
};

struct ResourceClaimConsumerReference {
  std::string api_group;
  std::string resource;
  std::string name;
  std::string uid;
  friend bool operator==(const ResourceClaimConsumerReference&, const ResourceClaimConsumerReference&) = default;
};

struct ResourceClaim {
  std::string api_version;  // the version it was read with, e.g. "resource.k8s.io/v1"
  std::string namespace_name;
  std::string name;
  std::string uid;
  std::string resource_version;
  bool allocated = false;  // status.allocation is set
  std::vector<DeviceRequestAllocationResult> results;
  std::vector<DeviceAllocationConfiguration> configs;
  std::vector<ResourceClaimConsumerReference> reserved_for;
  // metadata.annotations["resource.kubernetes.io/pod-claim-name"]: set on
  // claims made from a ResourceClaimTemplate.
  std::optional<std::string> pod_claim_name;
  // status as raw JSON text, byte-exact as received ("" when absent).
  std::string status_json;

  // "<ns>/<name>" for messages.
  std::string Ref() const { return model::ClaimRef{namespace_name, uid, name}.ObjectName(); }
  friend bool operator==(const ResourceClaim&, const ResourceClaim&) = default;
};

// Decodes a ResourceClaim object of any served version. Unknown fields are
// ignored (newer servers add fields); wrong types are errors.
Result<ResourceClaim> DecodeResourceClaim(std::string_view json_text);

// The two readings behind DecodeResourceClaim, apart for the test that
// holds them to the same verdicts.
//
// One pass straight into the claim, without a document tree: the cost of a
// fetch on every prepare. nullopt when it does not take the text (any error,
// a member it reads given twice); the claim it returns is the one the tree
// reading returns.
std::optional<ResourceClaim> DecodeResourceClaimFast(std::string_view json_text);
// Parses into a document tree and reads that: slower, and the source of
// every error message.
Result<ResourceClaim> DecodeResourceClaimTree(std::string_view json_text);

}  // namespace nvdra::kube
