#include "driver/reconciler.h"

#include <algorithm>
#include <set>

#include "util/log.h"

namespace nvdra::driver {

Reconciler::Reconciler(Engine& engine, ClaimSource& claims, metrics::DraMetrics* metrics, ReconcilerOptions options)
    : engine_(engine),
      claims_(claims),
      metrics_(metrics),
      options_(options),
      worker_({.period = options.period,
               .jitter = options.jitter,
               .clock = options.clock,
               .name = "the reconciler pass",
               .thread_name = "reconciler",
               .group = options.group},
              [this] { return Pass(); }) {}

Reconciler::~Reconciler() { Stop(); }

ReconcileReport Reconciler::RunOnce(bool deep) {
  MutexLock run_lock(run_mu_);
  ReconcileReport rep;
  auto entries = engine_.Entries();
  if (!entries.ok()) {
    NVDRA_WARN("reconcile: read ledger: {}", entries.status().message());
    rep.errors++;
    if (metrics_ != nullptr) metrics_->RecordReconcileRun("error");
    return rep;
  }

  std::set<std::string> live;
  std::set<std::string> seen_gone;
  auto now = options_.clock->Now();
  for (const auto& e : *entries) {
    if (!ledger::HoldsResources(e.state)) continue;
    live.insert(e.uid);
    // Shallow passes leave prepared claims of this boot to the kubelet; an
    // earlier boot's are checked every pass until they are released.
    if (!deep && e.state == ledger::ClaimState::kPrepareCompleted && !e.from_earlier_boot) {
      if (gone_since_.count(e.uid)) seen_gone.insert(e.uid);  // keep its grace clock running
      continue;
    }
    CheckEntry(e, now, rep, seen_gone);
  }
  for (auto it = gone_since_.begin(); it != gone_since_.end();) {
    it = seen_gone.count(it->first) ? std::next(it) : gone_since_.erase(it);
  }

  if (Status gc = engine_.CollectGarbage(); !gc.ok()) {
    NVDRA_WARN("reconcile: ledger garbage collection: {}", gc.message());
    rep.errors++;
  }
  // A ledger that was lost is rebuilt from the CDI specs first; until that
  // is done every spec stays (it may be a prepared claim's).
  auto recovered = engine_.RecoverLostClaims();
  if (!recovered.ok()) {
    NVDRA_WARN("reconcile: ledger recovery: {}", recovered.status().message());
    rep.errors++;
  } else if (*recovered) {
    rep.orphan_specs_removed = engine_.SweepOrphanSpecs(live, &rep.errors);
  } else {
    rep.recovering = true;
  }
  Finish(deep, rep);
  return rep;
}

// Asks the API server about one live entry, decides, and has the engine act.
void Reconciler::CheckEntry(const ledger::ClaimEntry& e, Clock::time_point now, ReconcileReport& rep,
                            std::set<std::string>& seen_gone) {
  rep.checked++;
  Result<ClaimSnapshot> current = Unavailable("not asked");
  if (!e.name.empty()) current = claims_.Get(e.ns, e.name);
  DecideInput in{options_.node_name, now, std::nullopt, options_.completed_grace};
  if (auto it = gone_since_.find(e.uid); it != gone_since_.end()) in.gone_since = it->second;
  Decision d = Decide(e, current, in);
  if (d.action == Action::kWaitGrace || d.action == Action::kCannotCheck ||
      (d.action == Action::kUnprepare && e.state == ledger::ClaimState::kPrepareCompleted)) {
    gone_since_.emplace(e.uid, now);
    seen_gone.insert(e.uid);
  }
  Record(e, d, rep);
  if (d.action != Action::kUnprepare) return;
  Status s = engine_.Carry(e, d);
  bool completed = e.state == ledger::ClaimState::kPrepareCompleted;
  if (!s.ok()) {
    rep.errors++;
    return;
  }
  if (completed) {
    rep.unprepared_completed++;
    gone_since_.erase(e.uid);
    seen_gone.erase(e.uid);
  } else {
    rep.unprepared_started++;
  }
  if (metrics_ != nullptr) metrics_->RecordReconcileUnprepared(completed ? "completed_gone" : "started_gone");
}

// Counts and logs a decision that needs no action from the engine.
void Reconciler::Record(const ledger::ClaimEntry& e, const Decision& d, ReconcileReport& rep) {
  const std::string ref = model::ClaimRef{e.ns, e.uid, e.name}.ToString();
  switch (d.action) {
    case Action::kCannotCheck:
      if (d.grace_started) {
        NVDRA_WARN("reconcile: claim {} has no name in the ledger, so it cannot be checked; it is released after the "
                   "grace period unless a Prepare or Unprepare of it comes first",
                   e.uid);
      }
      break;
    case Action::kRetryLater:
      rep.api_errors++;
      NVDRA_VLOG(4, "reconcile: cannot check claim {}: {}", ref, d.judgement.why);
      break;
    case Action::kKeep:
      if (e.state == ledger::ClaimState::kPrepareStarted) {
        NVDRA_VLOG(4, "Checkpointed RC cleanup: partially prepared claim not stale: {}", ref);
      }
      break;
    case Action::kWaitGrace:
      rep.stale_completed++;
      if (d.grace_started) {
        NVDRA_WARN("prepared claim {}: {}; unpreparing it after the grace period unless the kubelet does first", ref,
                   d.judgement.why);
      }
      break;
    case Action::kUnprepare: break;
  }
}

void Reconciler::Finish(bool deep, ReconcileReport& rep) {
  if (metrics_ != nullptr) {
    if (deep) metrics_->SetStaleCompletedClaims(rep.stale_completed);
    metrics_->RecordReconcileRun(rep.errors == 0 ? "success" : "error");
  }
  engine_.RefreshGauges();
  NVDRA_VLOG(4, "reconcile: checked {} claims, unprepared {} half-prepared and {} gone prepared, {} API errors",
             rep.checked, rep.unprepared_started, rep.unprepared_completed, rep.api_errors);
}

void Reconciler::Start() { worker_.Start(); }

void Reconciler::Stop() { worker_.Stop(); }

void Reconciler::Trigger() { worker_.Trigger(); }

uint64_t Reconciler::runs() const { return worker_.runs(); }

bool Reconciler::WaitForRuns(uint64_t runs, std::chrono::milliseconds timeout) {
  return worker_.WaitForRuns(runs, timeout);
}

Status Reconciler::Pass() {
  // Inside a pass, runs() counts the passes before this one.
  uint64_t every = static_cast<uint64_t>(std::max(1, options_.completed_check_every));
  RunOnce(worker_.runs() % every == 0);
  // Problems are per claim and counted in the report; the next pass comes
  // one period later either way.
  return Status::Ok();
}

}  // namespace nvdra::driver
