#include "driver/claims_view.h"

namespace nvdra::driver {

bool ClaimsView::SharedWithOthers(const std::string& device, const std::string& claim_uid) const {
  auto holders = HoldersOf(device, claim_uid);
  if (!holders.ok()) return true;
  for (const auto& h : *holders) {
    if (h.state != HoldState::kUnpreparing) return true;
  }
  return false;
}

bool ClaimsView::PreparedByLiveClaim(const std::string& device, const std::string& driver) const {
  auto holders = HoldersOf(device);
  if (!holders.ok()) return false;
  for (const auto& h : *holders) {
    if (h.state == HoldState::kUnpreparing) continue;
    for (const auto& a : h.allocation) {
      if (a.device == device && a.driver == driver) return true;
    }
  }
  return false;
}

}  // namespace nvdra::driver
