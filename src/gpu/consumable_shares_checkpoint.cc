// Consumable shares' part of the Go driver's checkpoint: a share per
// allocation result with a share id (admin access aside), its
// consumedCapacity parsed as Kubernetes quantities; an amount that does not
// parse is kept as the largest one, so the share still takes room rather
// than making it.
#include <limits>

#include "config/quantity.h"
#include "gpu/gpu_handlers.h"

namespace nvdra::gpu {

namespace {

void ImportHeldShares(const ledger::ClaimEntry& e, std::vector<ledger::HeldShare>& out) {
  for (const auto& a : e.allocation) {
    if (a.share_id.empty() || a.admin_access) continue;
    ledger::HeldShare s;
    s.resource = a.device;
    s.share_id = a.share_id;
    for (const auto& [name, text] : a.consumed_capacity) {
      auto q = config::Quantity::Parse(text);
      s.consumed[name] = q.ok() ? q->value() : std::numeric_limits<int64_t>::max();
    }
    out.push_back(std::move(s));
  }
}

}  // namespace

CheckpointPiece ConsumableSharesCheckpointPiece() {
  CheckpointPiece p;
  p.import_held = ImportHeldShares;
  return p;
}

}  // namespace nvdra::gpu
