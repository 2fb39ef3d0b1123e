// Runs the claims of NodePrepareResources / NodeUnprepareResources calls on
// an engine: validates the request, fans claims out to a bounded worker pool
// (a slow claim delays an independent one only while every worker is busy;
// further claims queue), answers each claim by its deadline (the work goes
// on in the background and a kubelet retry joins it), and never runs two
// operations on the same claim UID at once. A call holds no thread while it
// waits: its answer is delivered by whoever completes it. Knows nothing
// about gRPC; the v1 and v1beta1 services both sit on top of it.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
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
  // Claims the engine works on at once: each is a thread while it runs.
  // Calls beyond wait in the queue (never refused) and are answered with
  // a retryable DeadlineExceeded at claim_timeout if still not done. Few,
  // because a claim is mostly short local work (ledger, CDI file) and the
  // plugin's thread count stays bounded however many calls arrive.
  int workers = 2;
};

class ClaimDispatcher {
 public:
  using Clock = std::chrono::steady_clock;

  ClaimDispatcher(ClaimEngine& engine, DispatcherOptions options);
  ~ClaimDispatcher();  // Shutdown()
  ClaimDispatcher(const ClaimDispatcher&) = delete;
  ClaimDispatcher& operator=(const ClaimDispatcher&) = delete;

  using PrepareResults = std::map<std::string, PrepareOutcome>;
  using UnprepareResults = std::map<std::string, Status>;
  class Call;
  // A call in flight: its deadline, for the caller's timer (see Expire).
  using CallHandle = std::shared_ptr<Call>;

  // Exactly one entry per distinct claim UID of the request. A non-OK
  // Status only for a request that cannot be answered per claim (a claim
  // without UID). `call_deadline` is the caller's own deadline, if any.
  // A claim's own failures keep the engine's Status; the dispatcher's are
  // InvalidArgument (a claim it refused), DeadlineExceeded (not answered in
  // time) and Unavailable (shutting down).
  //
  // StartPrepare/StartUnprepare hold no thread while the claims run: `done`
  // runs exactly once, on the worker that finished the call's last claim,
  // on the thread of Expire() or BeginShutdown(), or before Start returns
  // when there is nothing to wait for. It must not block. `worked` is the
  // longest worker's time on the call's claims, which the call's own
  // record of steps leaves to the workers' (util/request_steps.h).
  template <typename T>
  using Done = std::function<void(Result<T> results, Clock::duration worked)>;
  CallHandle StartPrepare(const std::vector<ClaimRef>& claims, Clock::time_point call_deadline,
                          Done<PrepareResults> done) EXCLUDES(mu_);
  CallHandle StartUnprepare(const std::vector<ClaimRef>& claims, Clock::time_point call_deadline,
                            Done<UnprepareResults> done) EXCLUDES(mu_);
  // When the call's claims are due (its own deadline or the claim timeout,
  // whichever comes first): the caller's timer then calls Expire.
  static Clock::time_point Deadline(const CallHandle& call);
  // Answers the call now: claims not done get DeadlineExceeded (their work
  // goes on; a retry joins it). A no-op for an answered call.
  void Expire(const CallHandle& call) EXCLUDES(mu_);

  // The same, waiting on the calling thread (tests, tools).
  Result<PrepareResults> Prepare(const std::vector<ClaimRef>& claims,
                                 Clock::time_point call_deadline = Clock::time_point::max()) EXCLUDES(mu_);
  // Entry value: OK on success, else the claim's error.
  Result<UnprepareResults> Unprepare(const std::vector<ClaimRef>& claims,
                                     Clock::time_point call_deadline = Clock::time_point::max()) EXCLUDES(mu_);

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
    // The calls waiting for this task (a retry joins a running task).
    std::vector<std::shared_ptr<Call>> calls;
  };
  struct UidChain {
    std::shared_ptr<Task> running;
    std::deque<std::shared_ptr<Task>> queued;
  };

  // Per-claim validation; on failure every such claim gets `errors[uid]`.
  Status ValidateRequest(const std::vector<ClaimRef>& claims, const char* op, std::map<std::string, Status>& errors,
                         std::vector<ClaimRef>& valid) const;
  std::shared_ptr<Task> SubmitLocked(Op op, const ClaimRef& claim, std::vector<std::function<void()>>& answers)
      REQUIRES(mu_);
  void StartLocked(std::shared_ptr<Task> task, std::vector<std::function<void()>>& answers) REQUIRES(mu_);
  void RunTask(const std::shared_ptr<Task>& task) EXCLUDES(mu_);
  // Counts `task` done for the calls waiting for it; what answers the calls
  // it completed goes to `answers`, to run outside mu_.
  void TaskDoneLocked(Task& task, std::vector<std::function<void()>>& answers) REQUIRES(mu_);
  // Calls the engine behind the exception barrier: whatever escapes it
  // becomes this claim's internal error.
  void CallEngine(const Task& task, Clock::time_point deadline, PrepareOutcome& prepare, Status& unprepare)
      EXCLUDES(mu_);
  // Submits the valid claims of one call; `answer` builds the call's answer
  // (see Call). Answered before this returns when there is nothing to wait
  // for (no claims, or shutting down).
  CallHandle Start(Op op, std::vector<ClaimRef> claims, Clock::time_point call_deadline,
                   std::function<std::function<void()>(Call&, const std::vector<Status>&)> answer) EXCLUDES(mu_);
  // Marks `call` answered and returns what answers it, to run outside mu_.
  std::function<void()> AnswerLocked(const std::shared_ptr<Call>& call) REQUIRES(mu_);
  void Answer(std::vector<std::function<void()>> answers) EXCLUDES(mu_);
  Status TimeoutError(Op op, const ClaimRef& claim) const;

  ClaimEngine& engine_;
  const DispatcherOptions options_;
  Mutex mu_;
  // The calls not answered yet.
  std::set<std::shared_ptr<Call>> pending_ GUARDED_BY(mu_);
  std::map<std::string, UidChain> chains_ GUARDED_BY(mu_);
  bool shutting_down_ GUARDED_BY(mu_) = false;
  WorkerPool pool_;  // last: its threads stop before the rest is destroyed
};

}  // namespace nvdra::kubelet
