// The reconciler: at start and periodically (with jitter) it compares every
// ledger entry with the API server, decides what to do about it (Decide in
// claim_decision.h, a pure function) and has the engine carry it out:
//   - PrepareStarted / UnprepareStarted entries whose ResourceClaim is gone
//     (or exists with another UID) or stale (deallocated, allocated again
//     with other devices, or to another node) are unprepared by the plugin;
//   - PrepareCompleted entries whose claim is gone or stale are reported, and
//     unprepared once they stayed so for the grace period (the kubelet
//     normally unprepares them; this catches force-deleted pods);
//   - an API error leaves the entry for the next round;
//   - expired tombstones are dropped and the ledger compacted when worthwhile;
//   - CDI spec files of ours that belong to no live claim, and temp files a
//     crashed write left, are removed.
#pragma once

#include <chrono>
#include <map>
#include <string>

#include "driver/claim_decision.h"
#include "driver/claim_source.h"
#include "driver/engine.h"
#include "metrics/dra_metrics.h"
#include "util/clock.h"
#include "util/mutex.h"
#include "util/periodic_worker.h"

namespace nvdra::driver {

struct ReconcilerOptions {
  std::chrono::milliseconds period{60'000};
  double jitter = 0.1;  // each wait is period * (1 + U[0, jitter])
  std::chrono::milliseconds completed_grace{600'000};
  // Prepared claims are normally released by the kubelet, so checking each of
  // them against the API server every pass would only spend the client's rate
  // limit (shared with Prepare). They are checked on every N-th pass (and on
  // the first); half-prepared claims on every pass.
  int completed_check_every = 10;
  // This node's name (the pool of its devices); see JudgeClaim.
  std::string node_name;
  const Clock* clock = &SystemClock::Get();
  // Run on this group's thread instead of one of its own. Optional; must
  // outlive the reconciler.
  PeriodicGroup* group = nullptr;
};

struct ReconcileReport {
  int checked = 0;
  int unprepared_started = 0;    // half-prepared claims rolled back
  int unprepared_completed = 0;  // prepared claims gone past the grace period
  int stale_completed = 0;       // prepared claims gone or stale, still within the grace period
  int api_errors = 0;
  int orphan_specs_removed = 0;
  int errors = 0;
  bool recovering = false;  // a lost ledger is still being rebuilt: no spec was swept
};

class Reconciler {
 public:
  Reconciler(Engine& engine, ClaimSource& claims, metrics::DraMetrics* metrics, ReconcilerOptions options = {});
  ~Reconciler();

  // `deep`: also check PrepareCompleted entries against the API server.
  ReconcileReport RunOnce(bool deep = true) EXCLUDES(run_mu_);

  // Runs RunOnce now and then every period until Stop.
  void Start();
  void Stop();
  // Asks the loop for an early pass.
  void Trigger();
  // Waits until at least `runs` passes completed (for tests and start-up).
  bool WaitForRuns(uint64_t runs, std::chrono::milliseconds timeout);
  uint64_t runs() const;

 private:
  // One pass of the background loop.
  Status Pass();

  // The steps of one pass.
  void CheckEntry(const ledger::ClaimEntry& entry, Clock::time_point now, ReconcileReport& rep,
                  std::set<std::string>& seen_gone) REQUIRES(run_mu_);
  void Record(const ledger::ClaimEntry& entry, const Decision& d, ReconcileReport& rep);
  void Finish(bool deep, ReconcileReport& rep);

  Engine& engine_;
  ClaimSource& claims_;
  metrics::DraMetrics* metrics_;
  ReconcilerOptions options_;

  Mutex run_mu_;  // one pass at a time
  std::map<std::string, Clock::time_point> gone_since_ GUARDED_BY(run_mu_);

  // Last: it stops before the members its passes use go away.
  PeriodicWorker worker_;
};

}  // namespace nvdra::driver
