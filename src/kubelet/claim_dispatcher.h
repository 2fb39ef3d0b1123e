// Runs the claims of NodePrepareResources / NodeUnprepareResources calls on
// an engine: validates the request, fans claims out to a bounded worker pool
// so a slow claim never delays an independent one, answers each claim by its
// deadline (the work goes on in the background and a kubelet retry joins it),
// and never runs two operations on the same claim UID at once. Knows nothing
// about gRPC; the v1 and v1beta1 services both sit on top of it.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kubelet/claim_engine.h"
#include "kubelet/worker_pool.h"
#include "util/mutex.h"
#include "util/status.h"

namespace nvdra::kubelet {

struct DispatcherOptions {
  // Well below the kubelet's 45 s per-call timeout, so a late claim gets a
  // clear error instead of the whole call timing out.
  std::chrono::milliseconds claim_timeout{30000};
  // A pod references at most a few dozen claims; anything beyond this is
  // refused per claim without touching the engine.
  int max_claims_per_request = 128;
  // Claims the engine works on at once.
  int workers = 32;
};

class ClaimDispatcher {
 public:
  using Clock = std::chrono::steady_clock;

  ClaimDispatcher(ClaimEngine& engine, DispatcherOptions options);
  ~ClaimDispatcher();  // Shutdown()
  ClaimDispatcher(const ClaimDispatcher&) = delete;
  ClaimDispatcher& operator=(const ClaimDispatcher&) = delete;

  // Exactly one entry per distinct claim UID of the request. A non-OK
  // Status only for a request that cannot be answered per claim (a claim
  // without UID). `call_deadline` is the caller's own deadline, if any.
  // A claim's own failures keep the engine's Status; the dispatcher's are
  // InvalidArgument (a claim it refused), DeadlineExceeded (not answered in
  // time) and Unavailable (shutting down).
  Result<std::map<std::string, PrepareOutcome>> Prepare(
      const std::vector<ClaimRef>& claims, Clock::time_point call_deadline = Clock::time_point::max())
      EXCLUDES(mu_);
  // Entry value: OK on success, else the claim's error.
  Result<std::map<std::string, Status>> Unprepare(
      const std::vector<ClaimRef>& claims, Clock::time_point call_deadline = Clock::time_point::max())
      EXCLUDES(mu_);

  // Answers every waiting call with a retryable error and refuses new
  // work; returns at once.
  void BeginShutdown() EXCLUDES(mu_);
  // BeginShutdown(), then waits for the engine calls already running.
  void Shutdown() EXCLUDES(mu_);

  const DispatcherOptions& options() const { return options_; }

  // The gRPC thread's record of one call, for the engine's metrics
  // (ClaimEngine::RecordSteps).
  void RecordCallSteps(bool prepare, const RequestSteps& steps) { engine_.RecordSteps(prepare, steps, true); }

 private:
  enum class Op { kPrepare, kUnprepare };
  // Fields after `claim` belong to the dispatcher's mu_ (the analysis
  // cannot name another object's mutex from here).
  struct Task {
    Op op;
    ClaimRef claim;
    bool done = false;
    PrepareOutcome prepare = std::vector<PreparedDevice>{};
    Status unprepare;
    // The worker's time on the claim, which the waiting call's record
    // leaves to the worker's (util/request_steps.h).
    Clock::duration worked{};
  };
  // One waiting call: woken when the task it waits for is done (or on
  // shutdown), and by nothing else, so that a claim finishing wakes only
  // the calls that wait for it, not every call in flight.
  struct Waiter {
    CondVar cv;
    const Task* task = nullptr;
  };
  struct UidChain {
    std::shared_ptr<Task> running;
    std::deque<std::shared_ptr<Task>> queued;
  };

  // Per-claim validation; on failure every such claim gets `errors[uid]`.
  Status ValidateRequest(const std::vector<ClaimRef>& claims, const char* op,
                         std::map<std::string, Status>& errors,
                         std::vector<ClaimRef>& valid) const;
  std::shared_ptr<Task> SubmitLocked(Op op, const ClaimRef& claim) REQUIRES(mu_);
  void StartLocked(std::shared_ptr<Task> task) REQUIRES(mu_);
  void RunTask(const std::shared_ptr<Task>& task) EXCLUDES(mu_);
  // Wakes the calls waiting for `task`, and no other.
  void NotifyWaitersLocked(const Task* task) REQUIRES(mu_);
  // Calls the engine behind the exception barrier: whatever escapes it
  // becomes this claim's internal error.
  void CallEngine(const Task& task, Clock::time_point deadline, PrepareOutcome& prepare,
                  Status& unprepare) EXCLUDES(mu_);
  // Waits for `tasks`; returns, per task, OK when done or the error to report.
  std::vector<Status> Await(const std::vector<std::shared_ptr<Task>>& tasks, Op op,
                                 Clock::time_point deadline) REQUIRES(mu_);
  // Submits the claims and waits for them, timed as the call's dispatch
  // step less the longest worker's own time.
  std::vector<Status> SubmitAndAwait(Op op, const std::vector<ClaimRef>& claims, Clock::time_point deadline,
                                     std::vector<std::shared_ptr<Task>>& tasks) REQUIRES(mu_);
  Status TimeoutError(Op op, const ClaimRef& claim) const;

  ClaimEngine& engine_;
  const DispatcherOptions options_;
  Mutex mu_;
  // The calls waiting now; each is on its own stack (Await).
  std::vector<Waiter*> waiters_ GUARDED_BY(mu_);
  std::map<std::string, UidChain> chains_ GUARDED_BY(mu_);
  bool shutting_down_ GUARDED_BY(mu_) = false;
  WorkerPool pool_;  // last: its threads stop before the rest is destroyed
};

}  // namespace nvdra::kubelet
