// The claim engine both plugins share. For one claim it fetches the
// ResourceClaim, keeps this driver's results, resolves and validates opaque
// configs with the kind's rules, asks the kind for a plan, brackets the
// device work with the ledger (BeginPrepare .. CompletePrepare), turns what
// the kind returns into prepared devices, CDI ids and the claim's CDI spec
// (ClaimOutput, the one place that does), writes the spec, and answers with
// the devices. Unprepare runs from the ledger alone. It also carries out what
// the reconciler decides. GPU- or IMEX-specific behaviour lives behind the
// ClaimKind port. Beside it, each with a job of its own: the claims' device
// metadata (ClaimMetadata), the sweep of orphan files (OrphanSweeper), and
// claims rebuilt after a lost ledger or a driver reload (ClaimRecovery). All
// take a claim's locks through one ClaimLockSet, whose header gives the
// order in which the plugin takes its locks.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "cdi/cdi_spec_writer.h"
#include "config/feature_gates.h"
#include "driver/claim_decision.h"
#include "driver/claim_lock_set.h"
#include "driver/claim_metadata.h"
#include "driver/claim_output.h"
#include "driver/claim_recovery.h"
#include "driver/claim_source.h"
#include "driver/device_kind.h"
#include "driver/device_metadata_files.h"
#include "driver/orphan_sweeper.h"
#include "kubelet/claim_engine.h"
#include "ledger/claim_ledger.h"
#include "metrics/dra_metrics.h"
#include "metrics/step_timer.h"
#include "util/clock.h"

namespace nvdra::driver {

struct EngineOptions {
  config::FeatureGates gates;
  // This node's name (the pool of its devices): a conflicting holder whose
  // claim is allocated to another node counts as stale. "" skips that check.
  std::string node_name;
  // Called after a claim failed for a reason a retry cannot fix (bad config,
  // device not on this node), e.g. to post an Event on the ResourceClaim.
  std::function<void(const model::ClaimRef&, const std::string& message)> on_permanent_failure;
  const Clock* clock = &SystemClock::Get();
  // The device metadata files (KEP-5304). Written only with the
  // DeviceMetadata gate on, removed whatever the gates say (a claim prepared
  // while the gate was on may be unprepared after it went off). Null: the
  // kind has none. Must outlive the engine.
  const DeviceMetadataFiles* metadata = nullptr;
};

class Engine final : public kubelet::ClaimEngine {
 public:
  // All references must outlive the engine. `metrics` may be null.
  Engine(EngineOptions options, ledger::ClaimLedger& ledger, ClaimKind& kind, ClaimSource& claims,
         const cdi::CdiSpecWriter& cdi, metrics::DraMetrics* metrics);
  // Sets the ledger's device classifier to the kind's device types (see
  // ClaimLedger::SetDeviceClassifier), and clears it again.
  ~Engine() override;

  // A failure keeps its code; its message says which claim failed:
  // "error preparing devices for claim <ns/name:uid>: <why>".
  kubelet::PrepareOutcome PrepareClaim(const model::ClaimRef& claim,
                                       std::chrono::steady_clock::time_point deadline) override;
  // "error unpreparing devices for claim <ns/name:uid>: <why>" on failure.
  Status UnprepareClaim(const model::ClaimRef& claim, std::chrono::steady_clock::time_point deadline) override;
  // Adds the steps to nvdra_request_step_seconds_total.
  void RecordSteps(bool prepare, const RequestSteps& steps, bool whole_request) override;

  // --- What the reconciler asks for.
  // Every ledger entry, tombstones included (a fresh view).
  Result<std::vector<ledger::ClaimEntry>> Entries();
  // Carries out `decision` for `entry` (only kUnprepare acts).
  Status Carry(const ledger::ClaimEntry& entry, const Decision& decision);
  // Self-initiated unprepare of a ledger entry (a decision of the reconciler,
  // or the engine's own when a conflicting holder turns out to be stale).
  Status UnprepareEntry(const ledger::ClaimEntry& entry, const std::string& why);
  // Removes the CDI spec files of claims without a live ledger entry
  // (`live`: UIDs the caller saw live; each other one is checked again under
  // its claim's lock) and temp files a crashed write left behind. Returns how
  // many spec files were removed; `errors` counts failures.
  int SweepOrphanSpecs(const std::set<std::string>& live, int* errors) { return sweeper_.Sweep(live, errors); }
  // While the ledger says claims may be missing (an unreadable ledger was
  // set aside): rebuilds an entry for every claim CDI spec the ledger lacks
  // (ClaimLedger::RebuildEntry; the claim's next Prepare brings its name and
  // allocation), then ends the recovery. Returns whether the ledger is the
  // truth again; until then no CDI spec may be swept as an orphan.
  Result<bool> RecoverLostClaims() { return recovery_.RecoverLostClaims(); }
  // Drops expired tombstones and compacts the ledger when worthwhile.
  Status CollectGarbage();
  // After the hardware's driver was replaced: rewrites the CDI spec of every
  // prepared claim from its undo record with the kind's edits now (the new
  // driver's files), atomically and under the claim's lock, with the same
  // CDI device ids, so a container started from it afterwards gets the new
  // driver. Returns how many specs were rewritten; a claim whose spec cannot
  // be rebuilt is logged and counted in `errors`, its spec left as it was.
  int RewriteClaimSpecs(int* errors) { return recovery_.RewriteClaimSpecs(errors); }
  // Sets the prepared-devices and ledger gauges from the counts the ledger
  // keeps as records are applied: O(1) in the number of ledger entries. Runs
  // before each scrape of the metrics, not per request.
  void RefreshGauges();

  const std::string& driver() const { return driver_; }

 private:
  using Devices = std::vector<model::PreparedDevice>;

  // The steps of a Prepare, in order.
  Result<Devices> Prepare(const model::ClaimRef& ref, std::chrono::steady_clock::time_point deadline);
  Result<ClaimSnapshot> FetchClaim(const model::ClaimRef& ref, std::chrono::steady_clock::time_point deadline);
  Result<ClaimWork> OurResults(const model::ClaimRef& ref, const ClaimSnapshot& snap) const;
  // The recorded devices when the claim was completed in this boot with the
  // same allocation; nullopt otherwise.
  Result<std::optional<Devices>> CompletedThisBoot(const ClaimWork& work, const ClaimSnapshot& snap);
  Result<ClaimPlan> PlanClaim(ClaimWork& work, const ClaimSnapshot& snap);
  Result<ledger::BeginResult> Begin(const ClaimWork& work, const ClaimPlan& plan, const ClaimSnapshot& snap);
  // `attempt`: the BeginPrepare's, so that the completion is refused when
  // another process began or unprepared the claim in between.
  // `lock` is released during the kind's AwaitReady, if it asks for one, and
  // taken again before the CDI write.
  Result<Devices> PrepareDevices(const ClaimWork& work, const ClaimPlan& plan, const ClaimSnapshot& snap,
                                 const std::string& attempt, std::optional<ClaimLock>& lock);
  // The wait for readiness without the claim's locks, then the locks again
  // and the check that the claim is still ours to complete.
  Status AwaitWithoutLocks(const ClaimWork& work, const nlohmann::json& undo, const std::string& attempt,
                           std::optional<ClaimLock>& lock);
  // The answer to a Prepare of a claim completed in this boot. With the
  // claim as the API server has it (`snap`), its device metadata files are
  // written again too.
  Result<Devices> AlreadyPrepared(const ledger::ClaimEntry& entry, const ClaimSnapshot* snap);

  Status Unprepare(const model::ClaimRef& ref, std::chrono::steady_clock::time_point deadline);
  Status UnprepareLocked(const ledger::ClaimEntry& entry);
  // After a Conflict: if a PrepareStarted holder's claim is gone or stale,
  // unprepare it now. True if something was freed.
  bool ClearStaleHolders(const std::vector<std::string>& held, const std::string& self_uid);
  // Conflict (the ledger's wording) when another live claim holds one of
  // `held` and is not a stale PrepareStarted holder ClearStaleHolders frees;
  // a read of the ledger only, for a claim about to wait for readiness.
  Status RefuseHeldElsewhere(const std::vector<std::string>& held, const std::vector<std::string>& requested,
                             const std::string& self_uid);

  std::optional<metrics::StepTimer> Time(metrics::PrepareStep step) const;

  Result<ClaimLock> LockClaim(const std::string& uid, std::chrono::steady_clock::time_point deadline) {
    return locks_.Lock(uid, deadline);
  }

  EngineOptions options_;
  std::string driver_;
  ledger::ClaimLedger& ledger_;
  ClaimKind& kind_;
  ClaimSource& claims_;
  const cdi::CdiSpecWriter& cdi_;
  metrics::DraMetrics* metrics_;

  // Serialises all work on one claim UID, in this process and across the
  // processes on one ledger directory (see claim_lock_set.h for the order).
  ClaimLockSet locks_;
  ClaimMetadata metadata_;
  OrphanSweeper sweeper_;
  ClaimRecovery recovery_;
};

}  // namespace nvdra::driver
