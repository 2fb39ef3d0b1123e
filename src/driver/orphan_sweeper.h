// The reconciler's sweep of files no live claim owns: the claims' CDI specs
// and device metadata whose ledger entry is gone (or never was), and temp
// files a crashed write left. Each removal checks the ledger again under the
// claim's locks (ClaimLockSet::LockIfIdle), so a claim being prepared in
// this process or another is never taken for an orphan.
#pragma once

#include <set>
#include <string>

#include "cdi/cdi_spec_writer.h"
#include "driver/claim_lock_set.h"
#include "driver/device_metadata_files.h"
#include "ledger/claim_ledger.h"
#include "util/status.h"

namespace nvdra::driver {

class OrphanSweeper {
 public:
  // `metadata` null: the kind has no metadata files. All must outlive this.
  OrphanSweeper(ledger::ClaimLedger& ledger, const cdi::CdiSpecWriter& cdi, const DeviceMetadataFiles* metadata,
                ClaimLockSet& locks)
      : ledger_(ledger), cdi_(cdi), metadata_(metadata), locks_(locks) {}

  // Removes the CDI specs and metadata of claims without a live ledger
  // entry (`live`: UIDs the caller saw live; each other one is checked again
  // under its claim's locks) and temp files a crashed write left behind.
  // Returns how many files were removed; `errors` counts failures.
  int Sweep(const std::set<std::string>& live, int* errors);

 private:
  // True when the claim's spec was removed; false when it is live or busy.
  Result<bool> RemoveOrphanSpec(const std::string& uid);
  int SweepOrphanMetadata(const std::set<std::string>& live, int* errors);
  // Whether the ledger says `uid` holds nothing (no entry, or a tombstone).
  Result<bool> HoldsNothing(const std::string& uid);

  ledger::ClaimLedger& ledger_;
  const cdi::CdiSpecWriter& cdi_;
  const DeviceMetadataFiles* metadata_;
  ClaimLockSet& locks_;
};

}  // namespace nvdra::driver
