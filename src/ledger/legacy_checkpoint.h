// Import of the Go driver's checkpoint.json (see the upstream reference,
// "Checkpoint format"), so that replacing the Go plugin with this one keeps
// every prepared claim unpreparable. Read-only: the file is never modified,
// and its checksum is not checked (it is computed over a re-serialisation we
// cannot reproduce byte for byte); each claim is taken as far as it parses.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ledger/claim_entry.h"
#include "util/status.h"

namespace nvdra::ledger {

inline constexpr const char* kLegacyCheckpointFileName = "checkpoint.json";

struct LegacyImport {
  std::vector<ClaimEntry> entries;
  std::string node_boot_id;  // v2.nodeBootID; empty in old files
  std::vector<std::string> warnings;
};

// `driver_name` (may be empty: keep all) filters allocation results to ours.
// The whole upstream claim object is kept in undo["legacyCheckpoint"] so the
// device kind can undo what the Go driver did (MIG devices, MPS daemons).
Result<LegacyImport> ParseLegacyCheckpoint(std::string_view json_text,
                                           const std::string& driver_name,
                                           const std::string& current_boot_id);

}  // namespace nvdra::ledger
