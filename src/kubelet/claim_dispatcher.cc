#include "kubelet/claim_dispatcher.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "util/log.h"
#include "util/run_guarded.h"
#include "util/uid.h"

namespace nvdra::kubelet {
namespace {

const char* OpName(bool prepare) { return prepare ? "prepare" : "unprepare"; }

std::string FormatDuration(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return fmt::format("{}s", d.count() / 1000);
  return fmt::format("{}ms", d.count());
}

}  // namespace

ClaimDispatcher::ClaimDispatcher(ClaimEngine& engine, DispatcherOptions options)
    : engine_(engine), options_(options), pool_(options.workers) {}

ClaimDispatcher::~ClaimDispatcher() { Shutdown(); }

// One call in flight. Fields after `answer` belong to the dispatcher's mu_.
class ClaimDispatcher::Call {
 public:
  Op op;
  Clock::time_point deadline;
  std::vector<ClaimRef> claims;  // the valid ones, in request order
  // Builds the answer from `late` (per claim: OK when its task is done,
  // else the error to report) under mu_; returns what delivers it, to run
  // outside mu_.
  std::function<std::function<void()>(Call& self, const std::vector<Status>& late)> answer;
  std::vector<std::shared_ptr<Task>> tasks;
  size_t left = 0;  // tasks not done
  bool answered = false;
};

ClaimDispatcher::Clock::time_point ClaimDispatcher::Deadline(const CallHandle& call) { return call->deadline; }

void ClaimDispatcher::Answer(std::vector<std::function<void()>> answers) {
  for (auto& a : answers) a();
}

std::function<void()> ClaimDispatcher::AnswerLocked(const std::shared_ptr<Call>& call) {
  call->answered = true;
  pending_.erase(call);
  std::vector<Status> late(call->tasks.size());
  for (size_t i = 0; i < call->tasks.size(); ++i) {
    const Task& t = *call->tasks[i];
    if (t.done) continue;
    late[i] = shutting_down_
                  ? Unavailable(fmt::format(
                        "plugin is shutting down; {} of claim {} was not answered and the kubelet will retry",
                        OpName(call->op == Op::kPrepare), t.claim.ToString()))
                  : TimeoutError(call->op, t.claim);
  }
  std::function<void()> deliver = call->answer(*call, late);
  // A task still running keeps its calls until it is done; the call lets go
  // of its tasks now, so neither keeps the other alive longer.
  call->answer = nullptr;
  call->tasks.clear();
  return deliver;
}

void ClaimDispatcher::Expire(const CallHandle& call) {
  if (!call) return;
  std::function<void()> answer;
  {
    MutexLock lock(mu_);
    if (call->answered) return;
    answer = AnswerLocked(call);
  }
  answer();
}

void ClaimDispatcher::TaskDoneLocked(Task& task, std::vector<std::function<void()>>& answers) {
  for (const auto& call : task.calls) {
    if (!call->answered && --call->left == 0) answers.push_back(AnswerLocked(call));
  }
  task.calls.clear();
}

void ClaimDispatcher::BeginShutdown() {
  std::vector<std::function<void()>> answers;
  {
    MutexLock lock(mu_);
    shutting_down_ = true;
    std::set<std::shared_ptr<Call>> pending = pending_;
    for (const auto& call : pending) answers.push_back(AnswerLocked(call));
  }
  Answer(std::move(answers));
}

void ClaimDispatcher::Shutdown() {
  BeginShutdown();
  pool_.Shutdown();
}

Status ClaimDispatcher::ValidateRequest(const std::vector<ClaimRef>& claims, const char* op,
                                        std::map<std::string, Status>& errors, std::vector<ClaimRef>& valid) const {
  for (size_t i = 0; i < claims.size(); ++i) {
    if (claims[i].uid.empty()) {
      // The response is keyed by UID: such a claim cannot get its own answer.
      return InvalidArgument(fmt::format("{} request is malformed: claim #{} ({}/{}) has an empty UID", op, i + 1,
                                         claims[i].ns, claims[i].name));
    }
  }
  std::map<std::string, int> count;
  for (const auto& c : claims) ++count[c.uid];
  const int limit = options_.max_claims_per_request;
  for (const auto& c : claims) {
    if (errors.count(c.uid)) continue;
    if (static_cast<int>(claims.size()) > limit) {
      errors[c.uid] = InvalidArgument(
          fmt::format("{} request has {} claims, more than the limit of {} per call; claim {} was not {}d", op,
                      claims.size(), limit, c.ToString(), op));
      continue;
    }
    if (Status s = ValidateClaimUid(c.uid); !s.ok()) {
      errors[c.uid] = s.Wrap(fmt::format("claim {}/{}", c.ns, c.name));
      continue;
    }
    if (!IsValidObjectName(c.ns) || !IsValidObjectName(c.name)) {
      errors[c.uid] = InvalidArgument(fmt::format("claim {}: namespace and name must be valid Kubernetes object names",
                                                  c.ToString()));
      continue;
    }
    if (count[c.uid] > 1) {
      errors[c.uid] = InvalidArgument(fmt::format(
          "claim UID {} appears {} times in one {} request; each claim must be listed once", c.uid, count[c.uid], op));
      continue;
    }
    valid.push_back(c);
  }
  return Status::Ok();
}

std::shared_ptr<ClaimDispatcher::Task> ClaimDispatcher::SubmitLocked(Op op, const ClaimRef& claim,
                                                                     std::vector<std::function<void()>>& answers) {
  UidChain& chain = chains_[claim.uid];
  const std::shared_ptr<Task>& last = chain.queued.empty() ? chain.running : chain.queued.back();
  if (last && !last->done && last->op == op && last->claim == claim) {
    // A retry of a call that timed out: wait for the same work instead of
    // running the claim twice.
    NVDRA_VLOG(2, "{} of claim {} is already in progress; joining it", OpName(op == Op::kPrepare), claim.ToString());
    return last;
  }
  auto task = std::make_shared<Task>();
  task->op = op;
  task->claim = claim;
  if (!chain.running) {
    chain.running = task;
    StartLocked(task, answers);
  } else {
    chain.queued.push_back(task);
  }
  return task;
}

void ClaimDispatcher::StartLocked(std::shared_ptr<Task> task, std::vector<std::function<void()>>& answers) {
  if (pool_.Submit([this, task] { RunTask(task); })) return;
  // Only during shutdown: end the claim's chain without calling the engine.
  auto it = chains_.find(task->claim.uid);
  std::vector<std::shared_ptr<Task>> dropped{task};
  if (it != chains_.end()) {
    dropped.insert(dropped.end(), it->second.queued.begin(), it->second.queued.end());
    chains_.erase(it);
  }
  for (const auto& t : dropped) {
    Status msg = Unavailable(fmt::format("plugin is shutting down; {} of claim {} did not run",
                                         OpName(t->op == Op::kPrepare), t->claim.ToString()));
    t->done = true;
    t->prepare = msg;
    t->unprepare = msg;
    TaskDoneLocked(*t, answers);
  }
}

void ClaimDispatcher::RunTask(const std::shared_ptr<Task>& task) {
  // The engine's budget starts when the claim starts, not when it was queued
  // behind another operation on the same claim.
  const auto deadline = Clock::now() + options_.claim_timeout;
  PrepareOutcome prepare = std::vector<PreparedDevice>{};
  Status unprepare;
  Clock::duration worked{};
  bool stopping;
  {
    MutexLock lock(mu_);
    stopping = shutting_down_;
  }
  if (stopping) {
    // Queued before shutdown began: do not start new device work now.
    unprepare = Unavailable(fmt::format("plugin is shutting down; {} of claim {} did not run",
                                        OpName(task->op == Op::kPrepare), task->claim.ToString()));
    prepare = unprepare;
  } else {
    // The claim's own record; the engine's steps mark it.
    RequestSteps steps(RequestStep::kEngineOther);
    {
      ScopedSteps scope(&steps);
      CallEngine(*task, deadline, prepare, unprepare);
    }
    steps.Finish();
    worked = std::chrono::nanoseconds(steps.total_nanos());
    engine_.RecordSteps(task->op == Op::kPrepare, steps, false);
  }
  std::vector<std::function<void()>> answers;
  {
    MutexLock lock(mu_);
    task->worked = worked;
    task->done = true;
    task->prepare = std::move(prepare);
    task->unprepare = std::move(unprepare);
    auto it = chains_.find(task->claim.uid);
    if (it != chains_.end() && it->second.running == task) {
      UidChain& chain = it->second;
      chain.running.reset();
      if (!chain.queued.empty()) {
        std::shared_ptr<Task> next = chain.queued.front();
        chain.queued.pop_front();
        chain.running = next;
        StartLocked(std::move(next), answers);
      } else {
        chains_.erase(it);
      }
    }
    TaskDoneLocked(*task, answers);
  }
  Answer(std::move(answers));
}

void ClaimDispatcher::CallEngine(const Task& task, Clock::time_point deadline, PrepareOutcome& prepare,
                                 Status& unprepare) {
  // An exception must not end the worker thread (and with it the process);
  // it fails this claim alone and the kubelet retries.
  const std::string what = fmt::format("{} of claim {}", OpName(task.op == Op::kPrepare), task.claim.ToString());
  if (task.op == Op::kPrepare) {
    prepare = RunGuarded(what, [&] { return engine_.PrepareClaim(task.claim, deadline); });
  } else {
    unprepare = RunGuarded(what, [&] { return engine_.UnprepareClaim(task.claim, deadline); });
  }
}

Status ClaimDispatcher::TimeoutError(Op op, const ClaimRef& claim) const {
  return DeadlineExceeded(
      fmt::format("{} of claim {} did not finish within {}; it goes on in the background and the kubelet will retry",
                  OpName(op == Op::kPrepare), claim.ToString(), FormatDuration(options_.claim_timeout)));
}

ClaimDispatcher::CallHandle ClaimDispatcher::Start(
    Op op, std::vector<ClaimRef> claims, Clock::time_point call_deadline,
    std::function<std::function<void()>(Call&, const std::vector<Status>&)> answer) {
  auto call = std::make_shared<Call>();
  call->op = op;
  call->deadline = std::min(Clock::now() + options_.claim_timeout, call_deadline);
  call->claims = std::move(claims);
  call->answer = std::move(answer);
  std::vector<std::function<void()>> answers;
  {
    MutexLock lock(mu_);
    if (shutting_down_) {
      std::vector<Status> refused;
      for (const auto& c : call->claims) {
        refused.push_back(Unavailable(fmt::format("plugin is shutting down; {} of claim {} was refused and the "
                                                  "kubelet will retry",
                                                  OpName(op == Op::kPrepare), c.ToString())));
      }
      call->answered = true;
      answers.push_back(call->answer(*call, refused));
      call->answer = nullptr;
    } else {
      for (const auto& c : call->claims) {
        std::shared_ptr<Task> task = SubmitLocked(op, c, answers);
        call->tasks.push_back(task);
        if (!task->done) {
          task->calls.push_back(call);
          ++call->left;
        }
      }
      pending_.insert(call);
      if (call->left == 0) answers.push_back(AnswerLocked(call));
    }
  }
  Answer(std::move(answers));
  return call;
}

ClaimDispatcher::CallHandle ClaimDispatcher::StartPrepare(const std::vector<ClaimRef>& claims,
                                                          Clock::time_point call_deadline, Done<PrepareResults> done) {
  std::map<std::string, Status> invalid;
  std::vector<ClaimRef> valid;
  if (Status bad = ValidateRequest(claims, "prepare", invalid, valid); !bad.ok()) {
    done(bad, {});
    return nullptr;
  }
  auto out = std::make_shared<PrepareResults>();
  for (auto& [uid, err] : invalid) {
    NVDRA_ERROR("refusing to prepare claim: {}", err.message());
    out->insert_or_assign(uid, err);
  }
  return Start(Op::kPrepare, std::move(valid), call_deadline,
               [out, done = std::move(done)](Call& call,
                                             const std::vector<Status>& late) mutable -> std::function<void()> {
                 Clock::duration worked{};
                 for (size_t i = 0; i < call.claims.size(); ++i) {
                   const bool ok = late[i].ok();
                   out->insert_or_assign(call.claims[i].uid, ok ? call.tasks[i]->prepare : PrepareOutcome(late[i]));
                   if (ok) worked = std::max(worked, call.tasks[i]->worked);
                 }
                 return [out, done = std::move(done), claims = call.claims, worked] {
                   for (const auto& c : claims) {
                     const PrepareOutcome& r = out->at(c.uid);
                     if (r.ok()) continue;  // a success is logged once, by the engine
                     // The one line of a failed claim.
                     NVDRA_ERROR_S(r.status().permanent() ? "Permanent error preparing claim" : "Error preparing claim",
                                   {"claim", c.ns + "/" + c.name}, {"uid", c.uid}, {"err", r.status().message()});
                   }
                   done(std::move(*out), worked);
                 };
               });
}

ClaimDispatcher::CallHandle ClaimDispatcher::StartUnprepare(const std::vector<ClaimRef>& claims,
                                                            Clock::time_point call_deadline,
                                                            Done<UnprepareResults> done) {
  auto out = std::make_shared<UnprepareResults>();
  std::vector<ClaimRef> valid;
  if (Status bad = ValidateRequest(claims, "unprepare", *out, valid); !bad.ok()) {
    done(bad, {});
    return nullptr;
  }
  for (auto& [uid, err] : *out) NVDRA_ERROR("refusing to unprepare claim: {}", err.message());
  return Start(Op::kUnprepare, std::move(valid), call_deadline,
               [out, done = std::move(done)](Call& call,
                                             const std::vector<Status>& late) mutable -> std::function<void()> {
                 Clock::duration worked{};
                 for (size_t i = 0; i < call.claims.size(); ++i) {
                   const bool ok = late[i].ok();
                   (*out)[call.claims[i].uid] = ok ? call.tasks[i]->unprepare : late[i];
                   if (ok) worked = std::max(worked, call.tasks[i]->worked);
                 }
                 return [out, done = std::move(done), claims = call.claims, worked] {
                   for (const auto& c : claims) {
                     const Status& err = out->at(c.uid);
                     if (err.ok()) continue;  // a success is logged once, by the engine
                     NVDRA_ERROR_S("Error unpreparing claim", {"claim", c.ns + "/" + c.name}, {"uid", c.uid},
                                   {"err", err.message()});
                   }
                   done(std::move(*out), worked);
                 };
               });
}

namespace {

// Runs `start` and waits on this thread for its answer, expiring the call
// at its deadline; timed as the caller's dispatch step less the longest
// worker's own time.
template <typename T, typename StartFn>
Result<T> WaitForAnswer(ClaimDispatcher& dispatcher, StartFn start) {
  struct Slot {
    Mutex mu;
    CondVar cv;
    std::optional<Result<T>> result GUARDED_BY(mu);
    ClaimDispatcher::Clock::duration worked GUARDED_BY(mu){};
  };
  auto slot = std::make_shared<Slot>();
  ClaimDispatcher::Clock::duration worked{};
  std::optional<Result<T>> result;
  {
    TimedStep step(RequestStep::kDispatch);
    ClaimDispatcher::CallHandle call = start([slot](Result<T> r, ClaimDispatcher::Clock::duration w) {
      MutexLock lock(slot->mu);
      slot->result = std::move(r);
      slot->worked = w;
      slot->cv.NotifyAll();
    });
    {
      MutexLock lock(slot->mu);
      if (call) {
        slot->cv.WaitUntil(slot->mu, ClaimDispatcher::Deadline(call),
                           [&]() REQUIRES(slot->mu) { return slot->result.has_value(); });
      }
    }
    dispatcher.Expire(call);
    MutexLock lock(slot->mu);
    slot->cv.Wait(slot->mu, [&]() REQUIRES(slot->mu) { return slot->result.has_value(); });
    result = std::move(slot->result);
    worked = slot->worked;
  }
  if (RequestSteps* steps = CurrentRequestSteps()) steps->Exclude(RequestStep::kDispatch, worked);
  return std::move(*result);
}

}  // namespace

Result<ClaimDispatcher::PrepareResults> ClaimDispatcher::Prepare(const std::vector<ClaimRef>& claims,
                                                                 Clock::time_point call_deadline) {
  return WaitForAnswer<PrepareResults>(*this, [&](Done<PrepareResults> done) {
    return StartPrepare(claims, call_deadline, std::move(done));
  });
}

Result<ClaimDispatcher::UnprepareResults> ClaimDispatcher::Unprepare(const std::vector<ClaimRef>& claims,
                                                                     Clock::time_point call_deadline) {
  return WaitForAnswer<UnprepareResults>(*this, [&](Done<UnprepareResults> done) {
    return StartUnprepare(claims, call_deadline, std::move(done));
  });
}

}  // namespace nvdra::kubelet
