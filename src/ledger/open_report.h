// OpenReport: what ClaimLedger::Open (or a later reload) found on disk, and
// what recovery and the Go-checkpoint import did about it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nvdra::ledger {

// What Open (or a later reload) found on disk.
struct OpenReport {
  bool created = false;  // no ledger existed; a new one was written
  size_t records = 0;    // verified records read
  size_t claims = 0;     // entries after recovery (tombstones included)
  size_t earlier_boot_claims = 0;
  size_t expired_tombstones = 0;
  size_t imported_legacy_claims = 0;  // from the Go driver's checkpoint.json
  // A ledger.log (or the Go driver's checkpoint.json) existed but could not
  // be read: the claims it held are unknown here. Until FinishRecovery, the
  // plugin must keep every CDI spec and rebuild the entries of claims the API
  // server still shows allocated to this node (RebuildEntry). Survives
  // restarts (it is recorded in the ledger's meta record).
  bool claims_may_be_missing = false;
  // Resources two live claims hold according to the log, as
  // "<resource> (claims <uid>, <uid>)".
  std::vector<std::string> double_holds;
  uint64_t damaged_bytes = 0;
  std::string quarantine_file;        // where damaged bytes were copied
  std::string set_aside_file;         // the whole previous file, when it could not be read
  std::vector<std::string> warnings;  // e.g. records kept verbatim for a newer version
  std::vector<std::string> errors;    // damage and what was done about it
  bool clean() const { return errors.empty(); }
  std::string Summary() const;
};

}  // namespace nvdra::ledger
