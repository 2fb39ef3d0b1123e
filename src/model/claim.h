// The one model of a claim that every layer shares: an allocation result as
// the API server hands it out, a device as it is returned to the kubelet once
// prepared, and the reference that names a claim in logs and messages. The
// kube decoder, the ledger, the config resolver, the engine and the kubelet
// surface all speak these types, so a field added here reaches all of them.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace nvdra::model {

// One entry of ResourceClaim.status.allocation.devices.results.
struct AllocationResult {
  std::string request;  // may carry a subrequest suffix: "req/sub"
  std::string driver;
  std::string pool;
  std::string device;
  bool admin_access = false;
  std::string share_id;  // "" when the allocation has none
  // consumedCapacity: what this share of a device that allows multiple
  // allocations consumes, capacity name -> quantity as the API server wrote
  // it ("4Gi", "1"). Empty for an exclusive allocation.
  std::map<std::string, std::string> consumed_capacity;
  friend bool operator==(const AllocationResult&, const AllocationResult&) = default;
};

// One prepared device as recorded in the ledger and returned to the kubelet.
struct PreparedDevice {
  // Request names as in the allocation result; a "req/sub" subrequest
  // suffix is stripped by the kubelet surface before it reaches the kubelet.
  std::vector<std::string> requests;
  std::string pool;
  std::string device;
  std::vector<std::string> cdi_device_ids;
  // "" when the allocation has none. Only reported to kubelets speaking v1
  // (v1beta1 has no such field).
  std::string share_id;
  friend bool operator==(const PreparedDevice&, const PreparedDevice&) = default;
};

// A claim as the kubelet names it.
struct ClaimRef {
  std::string ns;
  std::string uid;
  std::string name;

  // "<ns>/<name>:<uid>": the one form claims take in our logs and messages,
  // the form the kubelet and upstream drivers log.
  std::string ToString() const { return ns + "/" + name + ":" + uid; }
  // "<ns>/<name>": the API object, for messages about the API server's copy.
  std::string ObjectName() const { return ns + "/" + name; }
  friend bool operator==(const ClaimRef&, const ClaimRef&) = default;
};

}  // namespace nvdra::model
