#include "driver/ledger_claims_view.h"

#include <utility>

namespace nvdra::driver {

std::optional<HeldClaim> LedgerClaimsView::ViewOf(const ledger::ClaimEntry& e) {
  HeldClaim c;
  switch (e.state) {
    case ledger::ClaimState::kTombstone: return std::nullopt;
    case ledger::ClaimState::kPrepareCompleted: c.state = HoldState::kPrepared; break;
    case ledger::ClaimState::kUnprepareStarted: c.state = HoldState::kUnpreparing; break;
    case ledger::ClaimState::kPrepareStarted:
      // An entry of a state a newer version wrote acts as PrepareStarted.
      c.state = HoldState::kPreparing;
      break;
  }
  c.uid = e.uid;
  c.ns = e.ns;
  c.name = e.name;
  c.allocation = e.allocation;
  for (const auto& d : e.prepared) c.devices.push_back(d.device);
  c.shares = e.shares;
  c.undo = e.undo;
  c.origin = e.origin;
  return c;
}

Result<std::vector<HeldClaim>> LedgerClaimsView::HeldClaims() const {
  NVDRA_ASSIGN_OR_RETURN(std::vector<ledger::ClaimEntry> entries, ledger_.ListHeld());
  std::vector<HeldClaim> out;
  for (const auto& e : entries) {
    if (auto c = ViewOf(e)) out.push_back(std::move(*c));
  }
  return out;
}

Result<std::vector<HeldClaim>> LedgerClaimsView::HoldersOf(const std::string& resource,
                                                           const std::string& except_uid) const {
  NVDRA_ASSIGN_OR_RETURN(std::vector<ledger::ClaimEntry> entries, ledger_.HoldersOf(resource, except_uid));
  std::vector<HeldClaim> out;
  for (const auto& e : entries) {
    if (auto c = ViewOf(e)) out.push_back(std::move(*c));
  }
  return out;
}

}  // namespace nvdra::driver
