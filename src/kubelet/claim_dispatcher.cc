#include "kubelet/claim_dispatcher.h"

#include <fmt/format.h>

#include <algorithm>

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

void ClaimDispatcher::BeginShutdown() {
  MutexLock lock(mu_);
  shutting_down_ = true;
  // Under mu_: a waiter leaves waiters_ (and its stack) only while holding it.
  for (Waiter* w : waiters_) w->cv.NotifyOne();
}

void ClaimDispatcher::Shutdown() {
  BeginShutdown();
  pool_.Shutdown();
}

Status ClaimDispatcher::ValidateRequest(const std::vector<ClaimRef>& claims, const char* op,
                                        std::map<std::string, Status>& errors,
                                        std::vector<ClaimRef>& valid) const {
  for (size_t i = 0; i < claims.size(); ++i) {
    if (claims[i].uid.empty()) {
      // The response is keyed by UID: such a claim cannot get its own answer.
      return InvalidArgument(fmt::format(
          "{} request is malformed: claim #{} ({}/{}) has an empty UID", op, i + 1,
          claims[i].ns, claims[i].name));
    }
  }
  std::map<std::string, int> count;
  for (const auto& c : claims) ++count[c.uid];
  const int limit = options_.max_claims_per_request;
  for (const auto& c : claims) {
    if (errors.count(c.uid)) continue;
    if (static_cast<int>(claims.size()) > limit) {
      errors[c.uid] = InvalidArgument(fmt::format(
          "{} request has {} claims, more than the limit of {} per call; claim {} was not {}d",
          op, claims.size(), limit, c.ToString(), op));
      continue;
    }
    if (Status s = ValidateClaimUid(c.uid); !s.ok()) {
      errors[c.uid] = s.Wrap(fmt::format("claim {}/{}", c.ns, c.name));
      continue;
    }
    if (!IsValidObjectName(c.ns) || !IsValidObjectName(c.name)) {
      errors[c.uid] = InvalidArgument(fmt::format(
          "claim {}: namespace and name must be valid Kubernetes object names", c.ToString()));
      continue;
    }
    if (count[c.uid] > 1) {
      errors[c.uid] = InvalidArgument(fmt::format(
          "claim UID {} appears {} times in one {} request; each claim must be listed once",
          c.uid, count[c.uid], op));
      continue;
    }
    valid.push_back(c);
  }
  return Status::Ok();
}

std::shared_ptr<ClaimDispatcher::Task> ClaimDispatcher::SubmitLocked(Op op, const ClaimRef& claim) {
  UidChain& chain = chains_[claim.uid];
  const std::shared_ptr<Task>& last = chain.queued.empty() ? chain.running : chain.queued.back();
  if (last && !last->done && last->op == op && last->claim == claim) {
    // A retry of a call that timed out: wait for the same work instead of
    // running the claim twice.
    NVDRA_VLOG(2, "{} of claim {} is already in progress; joining it", OpName(op == Op::kPrepare),
               claim.ToString());
    return last;
  }
  auto task = std::make_shared<Task>();
  task->op = op;
  task->claim = claim;
  if (!chain.running) {
    chain.running = task;
    StartLocked(task);
  } else {
    chain.queued.push_back(task);
  }
  return task;
}

void ClaimDispatcher::StartLocked(std::shared_ptr<Task> task) {
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
    NotifyWaitersLocked(t.get());
  }
}

void ClaimDispatcher::NotifyWaitersLocked(const Task* task) {
  // Under mu_: a waiter leaves waiters_ (and its stack) only while holding it.
  for (Waiter* w : waiters_) {
    if (w->task == task) w->cv.NotifyOne();
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
    unprepare = Unavailable(fmt::format(
        "plugin is shutting down; {} of claim {} did not run", OpName(task->op == Op::kPrepare),
        task->claim.ToString()));
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
        StartLocked(std::move(next));
      } else {
        chains_.erase(it);
      }
    }
    NotifyWaitersLocked(task.get());
  }
}

void ClaimDispatcher::CallEngine(const Task& task, Clock::time_point deadline,
                                 PrepareOutcome& prepare, Status& unprepare) {
  // An exception must not end the worker thread (and with it the process);
  // it fails this claim alone and the kubelet retries.
  const std::string what =
      fmt::format("{} of claim {}", OpName(task.op == Op::kPrepare), task.claim.ToString());
  if (task.op == Op::kPrepare) {
    prepare = RunGuarded(what, [&] { return engine_.PrepareClaim(task.claim, deadline); });
  } else {
    unprepare = RunGuarded(what, [&] { return engine_.UnprepareClaim(task.claim, deadline); });
  }
}

Status ClaimDispatcher::TimeoutError(Op op, const ClaimRef& claim) const {
  return DeadlineExceeded(fmt::format(
      "{} of claim {} did not finish within {}; it goes on in the background and the kubelet will retry",
      OpName(op == Op::kPrepare), claim.ToString(), FormatDuration(options_.claim_timeout)));
}

std::vector<Status> ClaimDispatcher::Await(const std::vector<std::shared_ptr<Task>>& tasks,
                                           Op op, Clock::time_point deadline) {
  std::vector<Status> errors(tasks.size());
  Waiter self;
  waiters_.push_back(&self);
  // Leaves waiters_ however this returns; mu_ is held throughout.
  struct Leave {
    std::vector<Waiter*>& waiters;
    Waiter* self;
    ~Leave() { waiters.erase(std::find(waiters.begin(), waiters.end(), self)); }
  } leave{waiters_, &self};
  for (size_t i = 0; i < tasks.size(); ++i) {
    const auto& t = tasks[i];
    self.task = t.get();
    self.cv.WaitUntil(mu_, deadline, [&]() REQUIRES(mu_) { return t->done || shutting_down_; });
    if (t->done) continue;
    if (shutting_down_) {
      errors[i] = Unavailable(fmt::format(
          "plugin is shutting down; {} of claim {} was not answered and the kubelet will retry",
          OpName(op == Op::kPrepare), t->claim.ToString()));
    } else {
      errors[i] = TimeoutError(op, t->claim);
    }
  }
  return errors;
}

std::vector<Status> ClaimDispatcher::SubmitAndAwait(Op op, const std::vector<ClaimRef>& claims,
                                                    Clock::time_point deadline,
                                                    std::vector<std::shared_ptr<Task>>& tasks) {
  std::vector<Status> late;
  {
    TimedStep step(RequestStep::kDispatch);
    for (const auto& c : claims) tasks.push_back(SubmitLocked(op, c));
    late = Await(tasks, op, deadline);
  }
  if (RequestSteps* steps = CurrentRequestSteps()) {
    Clock::duration longest{};
    for (const auto& t : tasks) longest = std::max(longest, t->worked);
    steps->Exclude(RequestStep::kDispatch, longest);
  }
  return late;
}

Result<std::map<std::string, PrepareOutcome>> ClaimDispatcher::Prepare(
    const std::vector<ClaimRef>& claims, Clock::time_point call_deadline) {
  std::map<std::string, Status> invalid;
  std::vector<ClaimRef> valid;
  NVDRA_RETURN_IF_ERROR(ValidateRequest(claims, "prepare", invalid, valid));
  std::map<std::string, PrepareOutcome> out;
  for (auto& [uid, err] : invalid) {
    NVDRA_ERROR("refusing to prepare claim: {}", err.message());
    out.insert_or_assign(uid, err);
  }
  if (valid.empty()) return out;

  const auto deadline = std::min(Clock::now() + options_.claim_timeout, call_deadline);
  MutexLock lock(mu_);
  if (shutting_down_) {
    for (const auto& c : valid) {
      out.insert_or_assign(c.uid, Unavailable(fmt::format(
          "plugin is shutting down; prepare of claim {} was refused and the kubelet will retry", c.ToString())));
    }
    return out;
  }
  std::vector<std::shared_ptr<Task>> tasks;
  std::vector<Status> late = SubmitAndAwait(Op::kPrepare, valid, deadline, tasks);
  for (size_t i = 0; i < tasks.size(); ++i) {
    const PrepareOutcome& r =
        out.insert_or_assign(valid[i].uid, late[i].ok() ? tasks[i]->prepare : PrepareOutcome(late[i]))
            .first->second;
    if (!r.ok()) {
      // The one line of a failed claim.
      NVDRA_ERROR_S(r.status().permanent() ? "Permanent error preparing claim" : "Error preparing claim",
                    {"claim", valid[i].ns + "/" + valid[i].name}, {"uid", valid[i].uid},
                    {"err", r.status().message()});
    }
    // A success is logged once, by the engine.
  }
  return out;
}

Result<std::map<std::string, Status>> ClaimDispatcher::Unprepare(
    const std::vector<ClaimRef>& claims, Clock::time_point call_deadline) {
  std::map<std::string, Status> out;
  std::vector<ClaimRef> valid;
  NVDRA_RETURN_IF_ERROR(ValidateRequest(claims, "unprepare", out, valid));
  for (auto& [uid, err] : out) NVDRA_ERROR("refusing to unprepare claim: {}", err.message());
  if (valid.empty()) return out;

  const auto deadline = std::min(Clock::now() + options_.claim_timeout, call_deadline);
  MutexLock lock(mu_);
  if (shutting_down_) {
    for (const auto& c : valid) {
      out[c.uid] = Unavailable(fmt::format(
          "plugin is shutting down; unprepare of claim {} was refused and the kubelet will retry", c.ToString()));
    }
    return out;
  }
  std::vector<std::shared_ptr<Task>> tasks;
  std::vector<Status> late = SubmitAndAwait(Op::kUnprepare, valid, deadline, tasks);
  for (size_t i = 0; i < tasks.size(); ++i) {
    Status& err = out[valid[i].uid];
    err = late[i].ok() ? tasks[i]->unprepare : late[i];
    if (!err.ok()) {
      NVDRA_ERROR_S("Error unpreparing claim", {"claim", valid[i].ns + "/" + valid[i].name}, {"uid", valid[i].uid},
                    {"err", err.message()});
    }
    // A success is logged once, by the engine.
  }
  return out;
}

}  // namespace nvdra::kubelet
