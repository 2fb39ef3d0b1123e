// The claim engine both plugins share. For one claim it fetches the
// ResourceClaim, keeps this driver's results, resolves and validates opaque
// configs, asks the device kind for a plan, brackets the device work with the
// ledger (BeginPrepare .. CompletePrepare), writes the claim's CDI spec, and
// answers with the devices and CDI ids. Unprepare runs from the ledger alone.
// GPU- or IMEX-specific behaviour lives behind DeviceKind.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "cdi/cdi_spec_writer.h"
#include "config/feature_gates.h"
#include "driver/claim_source.h"
#include "driver/device_kind.h"
#include "kubelet/claim_engine.h"
#include "ledger/claim_ledger.h"
#include "ledger/claim_locks.h"
#include "ledger/claim_operation_lock.h"
#include "metrics/dra_metrics.h"

namespace nvdra::driver {

struct EngineOptions {
  std::string driver;  // "gpu.nvidia.com"
  config::FeatureGates gates;
  // Called after a claim failed for a reason a retry cannot fix (bad config,
  // device not on this node), e.g. to post an Event on the ResourceClaim.
  std::function<void(const kubelet::ClaimRef&, const std::string& message)> on_permanent_failure;
};

class Engine final : public kubelet::ClaimEngine {
 public:
  // All references must outlive the engine. `metrics` may be null.
  Engine(EngineOptions options, ledger::ClaimLedger& ledger, DeviceKind& kind, ClaimSource& claims,
         const cdi::CdiSpecWriter& cdi, metrics::DraMetrics* metrics);

  kubelet::PrepareResult PrepareClaim(const kubelet::ClaimRef& claim,
                                      std::chrono::steady_clock::time_point deadline) override;
  std::string UnprepareClaim(const kubelet::ClaimRef& claim,
                             std::chrono::steady_clock::time_point deadline) override;

  // Self-initiated unprepare of a ledger entry (the reconciler's, and the
  // engine's own when a conflicting holder turns out to be stale).
  Status UnprepareEntry(const ledger::ClaimEntry& entry, const std::string& why);

  // Removes a CDI spec file of `uid` if the ledger holds no live entry for it.
  // Returns true when a file was removed.
  Result<bool> RemoveOrphanSpec(const std::string& uid);

  // Recomputes the prepared-devices and ledger gauges from the ledger.
  void RefreshGauges();

  const std::string& driver() const { return options_.driver; }

 private:
  Result<std::vector<kubelet::PreparedDevice>> Prepare(const kubelet::ClaimRef& ref,
                                                       std::chrono::steady_clock::time_point deadline,
                                                       bool* permanent);
  // The answer to a Prepare of a claim completed in this boot.
  Result<std::vector<kubelet::PreparedDevice>> AlreadyPrepared(const kubelet::ClaimRef& ref,
                                                               const ledger::ClaimEntry& entry);
  Status Unprepare(const kubelet::ClaimRef& ref, std::chrono::steady_clock::time_point deadline);

  Status UnprepareLocked(const ledger::ClaimEntry& entry);
  // After a Conflict: if a holder is only PrepareStarted and its claim is
  // gone from the API server, unprepare it now. True if something was freed.
  bool ClearStaleHolders(const std::vector<std::string>& held, const std::string& self_uid);

  EngineOptions options_;
  ledger::ClaimLedger& ledger_;
  DeviceKind& kind_;
  ClaimSource& claims_;
  const cdi::CdiSpecWriter& cdi_;
  metrics::DraMetrics* metrics_;

  // Serialises all work on one claim UID inside this process (the kubelet's
  // calls, the reconciler, a conflict check); other claims run in parallel.
  ledger::ClaimLocks locks_;
  // The same across processes on one ledger directory, taken after locks_
  // (so one process waits on the file lock with one thread per claim): held
  // from the ledger check through the device work, the CDI write and the
  // ledger's last transition, and by the orphan sweep's check-and-delete.
  ledger::ClaimOperationLocks op_locks_;
};

// Converts ledger devices into what the kubelet surface returns.
std::vector<kubelet::PreparedDevice> ToKubeletDevices(const std::vector<ledger::PreparedDevice>& devices);

}  // namespace nvdra::driver
