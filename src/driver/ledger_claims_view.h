// The ClaimsView a plugin hands its device kind: the claim ledger read
// through the view's narrow questions (every read is fresh, so it sees the
// claims of other plugin processes on the same ledger too).
#pragma once

#include <string>
#include <vector>

#include "driver/claims_view.h"
#include "ledger/claim_ledger.h"

namespace nvdra::driver {

class LedgerClaimsView final : public ClaimsView {
 public:
  // `ledger` must outlive the view.
  explicit LedgerClaimsView(ledger::ClaimLedger& ledger) : ledger_(ledger) {}

  Result<std::vector<HeldClaim>> HeldClaims() const override;
  Result<std::vector<HeldClaim>> HoldersOf(const std::string& resource, const std::string& except_uid) const override;

  // How a ledger entry that holds devices looks through the view (nullopt:
  // a tombstone, which holds nothing).
  static std::optional<HeldClaim> ViewOf(const ledger::ClaimEntry& e);

 private:
  ledger::ClaimLedger& ledger_;
};

}  // namespace nvdra::driver
