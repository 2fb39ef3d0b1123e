#include "driver/reconciler.h"

#include <algorithm>
#include <set>

#include "util/log.h"

namespace nvdra::driver {

Reconciler::Reconciler(Engine& engine, ledger::ClaimLedger& ledger, ClaimSource& claims,
                       const cdi::CdiSpecWriter& cdi, metrics::DraMetrics* metrics, ReconcilerOptions options)
    : engine_(engine),
      ledger_(ledger),
      claims_(claims),
      cdi_(cdi),
      metrics_(metrics),
      options_(options),
      worker_({.period = options.period, .jitter = options.jitter, .clock = options.clock, .name = "the reconciler pass"},
              [this] { return Pass(); }) {}

Reconciler::~Reconciler() { Stop(); }

ReconcileReport Reconciler::RunOnce(bool deep) {
  MutexLock run_lock(run_mu_);
  ReconcileReport rep;

  // CDI files first, ledger second: a spec written after this listing
  // belongs to a claim that is already in the ledger listed below.
  auto spec_uids = cdi_.ListClaimSpecUids();
  if (!spec_uids.ok()) {
    spdlog::warn("reconcile: list CDI specs: {}", spec_uids.status().message());
    rep.errors++;
  }
  auto entries = ledger_.List();
  if (!entries.ok()) {
    spdlog::warn("reconcile: read ledger: {}", entries.status().message());
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
    if (!deep && e.state == ledger::ClaimState::kPrepareCompleted) {
      if (gone_since_.count(e.uid)) seen_gone.insert(e.uid);  // keep its grace clock running
      continue;
    }
    rep.checked++;
    std::string ref = e.ns + "/" + e.name + ":" + e.uid;
    if (e.name.empty()) {
      spdlog::warn("reconcile: claim {} has no name in the ledger; cannot check it", e.uid);
      continue;
    }
    auto current = claims_.Get(e.ns, e.name);
    bool gone = false;
    if (!current.ok()) {
      if (current.status().code() == StatusCode::kNotFound) {
        gone = true;
      } else {
        rep.api_errors++;
        NVDRA_VLOG(4, "reconcile: cannot check claim {}: {}", ref, current.status().message());
        continue;
      }
    } else {
      gone = current->uid != e.uid;
    }
    if (!gone) {
      if (e.state == ledger::ClaimState::kPrepareStarted) {
        NVDRA_VLOG(4, "Checkpointed RC cleanup: partially prepared claim not stale: {}", ref);
      }
      continue;
    }
    if (e.state == ledger::ClaimState::kPrepareCompleted) {
      auto [it, inserted] = gone_since_.emplace(e.uid, now);
      seen_gone.insert(e.uid);
      if (now - it->second < options_.completed_grace) {
        rep.stale_completed++;
        if (inserted) {
          spdlog::warn("prepared claim {} no longer exists in the API server; unpreparing it after the grace period "
                       "unless the kubelet does first",
                       ref);
        }
        continue;
      }
      Status s = engine_.UnprepareEntry(e, "its ResourceClaim is gone past the grace period");
      if (s.ok()) {
        rep.unprepared_completed++;
        gone_since_.erase(e.uid);
        if (metrics_ != nullptr) metrics_->RecordReconcileUnprepared("completed_gone");
      } else {
        rep.errors++;
      }
      continue;
    }
    Status s = engine_.UnprepareEntry(e, "its ResourceClaim no longer exists");
    if (s.ok()) {
      rep.unprepared_started++;
      if (metrics_ != nullptr) metrics_->RecordReconcileUnprepared("started_gone");
    } else {
      rep.errors++;
    }
  }
  for (auto it = gone_since_.begin(); it != gone_since_.end();) {
    it = seen_gone.count(it->first) ? std::next(it) : gone_since_.erase(it);
  }

  Status gc = ledger_.CollectGarbage();
  if (!gc.ok()) {
    spdlog::warn("reconcile: ledger garbage collection: {}", gc.message());
    rep.errors++;
  }

  if (spec_uids.ok()) {
    for (const auto& uid : *spec_uids) {
      if (live.count(uid)) continue;
      auto removed = engine_.RemoveOrphanSpec(uid);
      if (!removed.ok()) {
        rep.errors++;
      } else if (*removed) {
        rep.orphan_specs_removed++;
      }
    }
  }

  if (metrics_ != nullptr) {
    if (deep) metrics_->SetStaleCompletedClaims(rep.stale_completed);
    metrics_->RecordReconcileRun(rep.errors == 0 ? "success" : "error");
  }
  engine_.RefreshGauges();
  NVDRA_VLOG(4, "reconcile: checked {} claims, unprepared {} half-prepared and {} gone prepared, {} API errors",
             rep.checked, rep.unprepared_started, rep.unprepared_completed, rep.api_errors);
  return rep;
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
