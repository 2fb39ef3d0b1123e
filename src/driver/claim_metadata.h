// The device metadata (KEP-5304) of the engine's claims: which files a claim
// has, written between its CDI spec and PrepareCompleted and removed at its
// Unprepare, all found again from the ledger entry. The files themselves
// (layout, atomic writes) are DeviceMetadataFiles'; orphans are swept by
// OrphanSweeper.
#pragma once

#include <vector>

#include "driver/claim_source.h"
#include "driver/device_kind.h"
#include "driver/device_metadata_files.h"
#include "ledger/claim_entry.h"
#include "model/claim.h"
#include "util/status.h"

namespace nvdra::driver {

class ClaimMetadata {
 public:
  // `files` null: the kind has no metadata; every call is then a no-op.
  // Both must outlive this object.
  ClaimMetadata(const DeviceMetadataFiles* files, const ClaimKind& kind) : files_(files), kind_(kind) {}

  bool enabled() const { return files_ != nullptr; }

  // Writes the files of every request of `results`, and adds each request's
  // CDI id to its first device of `devices` (one per result, in order);
  // null `devices` only writes the files again.
  Status Write(const ClaimSnapshot& snap, const std::vector<model::AllocationResult>& results,
               std::vector<model::PreparedDevice>* devices) const;
  // Whether the recorded devices name a metadata CDI id (the gate may have
  // changed since the claim was prepared: the recorded answer decides).
  bool Recorded(const ledger::ClaimEntry& entry) const;
  // Whether every metadata file and spec that the recorded devices' CDI ids
  // name is on disk (the fast path of a repeated Prepare needs no rewrite).
  bool Present(const ledger::ClaimEntry& entry) const;
  Status Remove(const ledger::ClaimEntry& entry) const;

 private:
  const DeviceMetadataFiles* files_;
  const ClaimKind& kind_;
};

}  // namespace nvdra::driver
