// The seam between the kubelet-facing gRPC surface and whatever prepares
// devices. The surface validates requests, runs claims concurrently, enforces
// deadlines and shapes responses; an engine only prepares or unprepares one
// claim at a time. Free of gRPC types so engines and their tests need none.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace nvdra::kubelet {

// A claim as the kubelet names it.
struct ClaimRef {
  std::string ns;
  std::string uid;
  std::string name;

  // "<ns>/<name>:<uid>", the form the kubelet and upstream drivers log.
  std::string ToString() const { return ns + "/" + name + ":" + uid; }
  friend bool operator==(const ClaimRef&, const ClaimRef&) = default;
};

struct PreparedDevice {
  // Request names as in the allocation result; a "req/sub" subrequest
  // suffix is stripped by the surface before it reaches the kubelet.
  std::vector<std::string> request_names;
  std::string pool;
  std::string device;
  std::vector<std::string> cdi_device_ids;
  // Only reported to kubelets speaking v1; v1beta1 has no such field.
  std::optional<std::string> share_id;

  friend bool operator==(const PreparedDevice&, const PreparedDevice&) = default;
};

struct PrepareResult {
  std::vector<PreparedDevice> devices;
  std::string error;  // empty on success
};

class ClaimEngine {
 public:
  virtual ~ClaimEngine() = default;
  // Called concurrently for different claims, from the surface's worker
  // pool; never twice at once for the same claim UID. `deadline` is the
  // per-claim deadline; the engine should give up cleanly when it passes.
  virtual PrepareResult PrepareClaim(const ClaimRef& claim,
                                     std::chrono::steady_clock::time_point deadline) = 0;
  // "" on success. An unknown claim is a success.
  virtual std::string UnprepareClaim(const ClaimRef& claim,
                                     std::chrono::steady_clock::time_point deadline) = 0;
};

}  // namespace nvdra::kubelet
