// Claims rebuilt from what outlives the ledger or the driver: after an
// unreadable ledger was set aside, an entry for every claim CDI spec the
// ledger lacks (RecoverLostClaims); after the hardware's driver was replaced,
// every prepared claim's CDI spec written again from its ledger entry
// (RewriteClaimSpecs). Both work under each claim's locks (ClaimLockSet).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cdi/cdi_spec_writer.h"
#include "driver/claim_lock_set.h"
#include "driver/device_kind.h"
#include "ledger/claim_ledger.h"
#include "util/status.h"

namespace nvdra::driver {

class ClaimRecovery {
 public:
  // Frees the resources `held` of stale claims other than `self_uid`; true
  // if something was freed (the engine's conflict handling).
  using ClearStaleHolders = std::function<bool(const std::vector<std::string>& held, const std::string& self_uid)>;

  // All must outlive this object.
  ClaimRecovery(ledger::ClaimLedger& ledger, ClaimKind& kind, const cdi::CdiSpecWriter& cdi, ClaimLockSet& locks,
                ClearStaleHolders clear_stale)
      : ledger_(ledger), kind_(kind), cdi_(cdi), locks_(locks), clear_stale_(std::move(clear_stale)) {}

  // While the ledger says claims may be missing (an unreadable ledger was
  // set aside): rebuilds an entry for every claim CDI spec the ledger lacks
  // (ClaimLedger::RebuildEntry; the claim's next Prepare brings its name and
  // allocation), then ends the recovery. Returns whether the ledger is the
  // truth again; until then no CDI spec may be swept as an orphan.
  Result<bool> RecoverLostClaims();
  // Rewrites the CDI spec of every prepared claim from its undo record with
  // the kind's edits now (the new driver's files), atomically and under the
  // claim's lock, with the same CDI device ids. Returns how many specs were
  // rewritten; a claim whose spec cannot be rebuilt is logged and counted in
  // `errors`, its spec left as it was.
  int RewriteClaimSpecs(int* errors);

 private:
  Status RebuildFromSpec(const std::string& uid);
  Result<bool> RewriteClaimSpec(const ledger::ClaimEntry& listed);

  ledger::ClaimLedger& ledger_;
  ClaimKind& kind_;
  const cdi::CdiSpecWriter& cdi_;
  ClaimLockSet& locks_;
  ClearStaleHolders clear_stale_;
};

}  // namespace nvdra::driver
