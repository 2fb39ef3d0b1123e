// The seam between the kubelet-facing gRPC surface and whatever prepares
// devices. The surface validates requests, runs claims concurrently, enforces
// deadlines and shapes responses; an engine only prepares or unprepares one
// claim at a time. Free of gRPC types so engines and their tests need none.
// Errors cross it as Status values: a claim's Status message() is the error
// the kubelet gets for that claim, word for word (users and the kubelet's
// logs grep for it), and its code tells the surface what kind of failure it
// was.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "model/claim.h"
#include "util/status.h"

namespace nvdra::kubelet {

using ClaimRef = model::ClaimRef;
using PreparedDevice = model::PreparedDevice;

// One claim's Prepare: the devices it holds, or why not.
using PrepareOutcome = Result<std::vector<PreparedDevice>>;

class ClaimEngine {
 public:
  virtual ~ClaimEngine() = default;
  // Called concurrently for different claims, from the surface's worker
  // pool; never twice at once for the same claim UID. `deadline` is the
  // per-claim deadline; the engine should give up cleanly when it passes.
  // A non-OK Status should carry a message: the kubelet reads an empty
  // error as success (the surface reports the code's name instead).
  virtual PrepareOutcome PrepareClaim(const ClaimRef& claim,
                                      std::chrono::steady_clock::time_point deadline) = 0;
  // OK on success. An unknown claim is a success.
  virtual Status UnprepareClaim(const ClaimRef& claim,
                                std::chrono::steady_clock::time_point deadline) = 0;
};

}  // namespace nvdra::kubelet
