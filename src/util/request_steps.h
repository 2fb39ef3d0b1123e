// Where the time of one Prepare or Unprepare goes: a per-request step timer.
// The thread working on a request installs a RequestSteps (ScopedSteps);
// code anywhere below marks the step it is in with a TimedStep, which does
// nothing when no request is being timed. Steps never overlap: entering a
// step pauses the one running and leaving it resumes that one, so nested
// steps (a log line inside a ledger transition) are charged once and the
// steps of a request add up to its whole time. Time the request spends in no
// named step goes to the record's base step ("other").
//
// The cost is one steady_clock read per step boundary and no allocation; the
// owner of the record adds it to aggregated totals once the request is done
// (metrics: nvdra_request_step_seconds_total). docs/benchmarks.md shows how
// bench/node_bench.py prints them.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace nvdra {

enum class RequestStep : uint8_t {
  // On the gRPC thread, once per request.
  kRpcOther,  // the handler's own work: claim list, validation, result map
  kDispatch,  // hand-off to the claim's worker thread and back (queue, wake-ups)
  kAnswer,    // building the response message
  // On the worker thread, once per claim.
  kEngineOther,    // the engine's own work not named below
  kClaimLock,      // the claim's in-process and cross-process locks
  kLedgerRead,     // ledger reads (Get) under the ledger's locks
  kClaimGet,       // the ResourceClaim GET, its decoding included
  kConfig,         // our results, opaque configs, the kind's plan and readiness
  kAppendStarted,  // the transition that appends PrepareStarted / UnprepareStarted
  kSyncStarted,    // waiting for the fdatasync that makes it durable
  kKindWork,       // the device kind's prepare or unprepare
  kCdi,            // building and writing the claim's CDI spec, or removing it
  kAppendFinal,    // the transition that appends PrepareCompleted / the tombstone (no sync wait)
  // On either thread.
  kLogging,  // formatting and writing log lines
};
inline constexpr size_t kRequestStepCount = static_cast<size_t>(RequestStep::kLogging) + 1;

// The step's metric label ("claim_get").
std::string_view RequestStepName(RequestStep step);

class RequestSteps {
 public:
  using Clock = std::chrono::steady_clock;

  // Starts timing at `start` (now by default), in `base`.
  explicit RequestSteps(RequestStep base, Clock::time_point start = Clock::now()) : running_(base), since_(start) {}

  // Charges the time since the last boundary to the running step and runs
  // `step` from now on; returns the step that was running. Tests pass the
  // time.
  RequestStep Switch(RequestStep step) { return Switch(step, Clock::now()); }
  RequestStep Switch(RequestStep step, Clock::time_point now) {
    ns_[Index(running_)] += (now - since_).count();
    since_ = now;
    const RequestStep was = running_;
    running_ = step;
    return was;
  }
  // Charges the running step up to now (call before reading the totals).
  void Finish() { Switch(running_); }
  // Takes `d` off `step`: time that another record accounts for (the
  // worker's part of a request the gRPC thread waited for).
  void Exclude(RequestStep step, Clock::duration d) { ns_[Index(step)] -= d.count(); }

  int64_t nanos(RequestStep step) const { return ns_[Index(step)]; }
  int64_t total_nanos() const {
    int64_t t = 0;
    for (int64_t n : ns_) t += n;
    return t;
  }

 private:
  static size_t Index(RequestStep s) { return static_cast<size_t>(s); }
  std::array<int64_t, kRequestStepCount> ns_{};
  RequestStep running_;
  Clock::time_point since_;
};

namespace steps_internal {
// The record of the request this thread works on; null when none is timed.
inline thread_local RequestSteps* current = nullptr;
}  // namespace steps_internal

inline RequestSteps* CurrentRequestSteps() { return steps_internal::current; }

// Makes `steps` this thread's record for the scope (null: time nothing).
class ScopedSteps {
 public:
  explicit ScopedSteps(RequestSteps* steps) : was_(steps_internal::current) { steps_internal::current = steps; }
  ScopedSteps(const ScopedSteps&) = delete;
  ScopedSteps& operator=(const ScopedSteps&) = delete;
  ~ScopedSteps() { steps_internal::current = was_; }

 private:
  RequestSteps* was_;
};

// Runs `step` for the scope on this thread's record, if there is one.
class TimedStep {
 public:
  explicit TimedStep(RequestStep step) : steps_(steps_internal::current) {
    if (steps_ != nullptr) was_ = steps_->Switch(step);
  }
  TimedStep(const TimedStep&) = delete;
  TimedStep& operator=(const TimedStep&) = delete;
  ~TimedStep() {
    if (steps_ != nullptr) steps_->Switch(was_);
  }

 private:
  RequestSteps* steps_;
  RequestStep was_ = RequestStep::kRpcOther;
};

}  // namespace nvdra
