#include "ledger/open_report.h"

#include <fmt/format.h>

namespace nvdra::ledger {

std::string OpenReport::Summary() const {
  std::string s = fmt::format("{} claims from {} records{}", claims, records, created ? " (new ledger)" : "");
  if (earlier_boot_claims > 0) s += fmt::format(", {} from an earlier boot", earlier_boot_claims);
  if (expired_tombstones > 0) s += fmt::format(", {} expired tombstones dropped", expired_tombstones);
  if (imported_legacy_claims > 0) s += fmt::format(", {} imported from checkpoint.json", imported_legacy_claims);
  if (claims_may_be_missing) {
    s += "; CLAIMS MAY BE MISSING: an unreadable ledger or checkpoint was set aside; every CDI spec is kept "
         "until the claims are rebuilt (nvdractl ledger rebuild)";
  }
  for (const auto& e : errors) s += "; ERROR: " + e;
  for (const auto& w : warnings) s += "; warning: " + w;
  return s;
}

}  // namespace nvdra::ledger
