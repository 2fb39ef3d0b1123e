// Read-only inspection of a ledger directory for operators (nvdractl ledger
// show|verify): decodes the log exactly as recovery would, but never writes,
// renames or creates anything in the directory.
#pragma once

#include <string>
#include <vector>

#include "ledger/claim_entry.h"
#include "ledger/log_format.h"
#include "util/status.h"

namespace nvdra::ledger {

struct LedgerInspection {
  std::string path;
  bool exists = false;
  HeaderStatus header = HeaderStatus::kOk;
  uint32_t version = 0;
  uint64_t file_size = 0;
  uint64_t generation = 0;
  size_t records = 0;
  std::vector<DamagedRange> damage;
  std::vector<std::string> notes;         // records kept verbatim, e.g. from a newer version
  size_t double_held = 0;                 // resources held by two live claims
  std::vector<std::string> double_holds;  // "<resource> (claims <uid>, <uid>)"
  bool claims_may_be_missing = false;     // an unreadable ledger was set aside, not yet recovered
  std::vector<ClaimEntry> entries;
  std::vector<std::string> side_files;  // quarantined or set-aside files in the directory

  // Bytes that do not verify.
  bool damaged() const { return exists && (header != HeaderStatus::kOk || !damage.empty()); }
  // Verified records that contradict each other (only lost records cause that).
  bool inconsistent() const { return double_held > 0 || claims_may_be_missing; }
};

// `current_boot_id` (may be empty) marks entries from an earlier boot.
Result<LedgerInspection> InspectLedger(const std::string& dir, const std::string& current_boot_id = "");

}  // namespace nvdra::ledger
