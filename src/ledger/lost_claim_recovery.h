// Recovery of claims whose ledger entries were lost (an unreadable ledger
// or Go checkpoint was set aside): the ledger's meta record says since when
// claims may be missing, until FinishRecovery; meanwhile the plugin keeps
// every CDI spec and rebuilds the entries of the claims they name. Pure
// functions: ClaimLedger records what they return.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "ledger/claim_entry.h"
#include "ledger/claim_transitions.h"
#include "ledger/ledger_state.h"
#include "util/status.h"

namespace nvdra::ledger {

// A claim whose entry was lost, rebuilt from what survived on the node (its
// CDI spec) and, where the caller has it, from the API server.
struct RebuiltClaim {
  std::string uid, ns, name;  // ns/name may be empty: the next Prepare brings them
  // Device names (the part after "<uid>-" in the CDI spec), held exclusively
  // unless `held` says otherwise.
  std::vector<std::string> devices;
  std::vector<std::string> cdi_device_ids;
  // The allocation results for this driver, when the API server was asked.
  std::vector<AllocatedDevice> allocation;
  std::optional<std::vector<std::string>> held;
  std::string source = "cdi";  // recorded in undo.rebuilt.from
};

int64_t UnixMs(std::chrono::system_clock::time_point t);

// The exclusive resources a rebuilt entry records: c.held, else the
// non-admin allocated devices, else the device names; sorted, unique.
std::vector<std::string> RebuiltHeld(const RebuiltClaim& c);

// The PrepareCompleted entry (this boot, undo {"rebuilt": {...}}) of a claim
// whose entry was lost. Writes nothing for a claim `cur` (its live entry,
// or nullptr) says the ledger knows; Conflict when another live claim holds
// one of its resources.
Result<Transition> RebuildTransition(const ClaimEntry* cur, const RebuiltClaim& c, const TransitionContext& ctx);

// Claims may be missing since `now`: the unreadable `file` was set aside.
void MarkClaimsMissing(LedgerState::Meta& meta, std::chrono::system_clock::time_point now, const std::string& file);
bool ClaimsMayBeMissing(const LedgerState::Meta& meta);
// Ends the recovery: the ledger is the truth again.
void ClearClaimsMissing(LedgerState::Meta& meta);

}  // namespace nvdra::ledger
