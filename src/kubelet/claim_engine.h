// The seam between the kubelet-facing gRPC surface and whatever prepares
// devices. The surface validates requests, runs claims concurrently, enforces
// deadlines and shapes responses; an engine only prepares or unprepares one
// claim at a time. Free of gRPC types so engines and their tests need none.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "model/claim.h"

namespace nvdra::kubelet {

using ClaimRef = model::ClaimRef;
using PreparedDevice = model::PreparedDevice;

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
