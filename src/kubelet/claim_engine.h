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
#include "util/request_steps.h"
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
  virtual PrepareOutcome PrepareClaim(const ClaimRef& claim, std::chrono::steady_clock::time_point deadline) = 0;
  // OK on success. An unknown claim is a success.
  virtual Status UnprepareClaim(const ClaimRef& claim, std::chrono::steady_clock::time_point deadline) = 0;
  // Where a call's time went (util/request_steps.h), for the engine's
  // metrics: the gRPC thread's record once per call (`whole_request`), and
  // each claim's record from its worker. Called after the work is done.
  virtual void RecordSteps(bool prepare, const RequestSteps& steps, bool whole_request) {
    (void)prepare;
    (void)steps;
    (void)whole_request;
  }
};

}  // namespace nvdra::kubelet
