#include "ledger/lost_claim_recovery.h"

#include <utility>

namespace nvdra::ledger {
namespace {

// The device as the kubelet was told about it, from what the CDI spec and
// the allocation (when the API server was asked) say.
PreparedDevice RebuiltDevice(const RebuiltClaim& c, const std::string& device) {
  PreparedDevice p;
  p.device = device;
  for (const auto& a : c.allocation) {
    if (a.device != device) continue;
    p.requests.push_back(a.request);
    p.pool = a.pool;
    p.share_id = a.share_id;
  }
  std::string suffix = "=" + c.uid + "-" + device;
  for (const auto& id : c.cdi_device_ids) {
    if (id.size() >= suffix.size() && id.compare(id.size() - suffix.size(), suffix.size(), suffix) == 0) {
      p.cdi_device_ids.push_back(id);
    }
  }
  return p;
}

}  // namespace

int64_t UnixMs(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

std::vector<std::string> RebuiltHeld(const RebuiltClaim& c) {
  return SortedUnique(c.held ? *c.held : (!c.allocation.empty() ? DefaultHeld(c.allocation) : c.devices));
}

Result<Transition> RebuildTransition(const ClaimEntry* cur, const RebuiltClaim& c, const TransitionContext& ctx) {
  if (cur != nullptr && HoldsResources(cur->state)) return Transition{};  // the ledger knows it
  std::vector<std::string> held = RebuiltHeld(c);
  NVDRA_RETURN_IF_ERROR(CheckNotHeldByOthers(held, !c.allocation.empty() ? DefaultHeld(c.allocation) : c.devices, c.uid,
                                             ctx, "; not rebuilding claim " + c.uid));
  ClaimEntry e;
  e.uid = c.uid;
  e.ns = c.ns;
  e.name = c.name;
  e.state = ClaimState::kPrepareCompleted;
  e.allocation = c.allocation;
  e.held = std::move(held);
  for (const auto& device : c.devices) e.prepared.push_back(RebuiltDevice(c, device));
  e.origin = ClaimOrigin::kRebuilt;
  // Where it was rebuilt from, for inspection, under the key that older
  // versions read as the origin.
  e.undo = {{"rebuilt", {{"from", c.source}, {"unixMs", UnixMs(ctx.now)}}}};
  // The CDI spec it was rebuilt from lives on tmpfs: it is of this boot.
  e.boot_id = ctx.boot_id;
  e.updated = ctx.now;
  if (cur != nullptr) e.extra = cur->extra;
  return Transition{BeginOutcome::kStarted, std::move(e), true};
}

void MarkClaimsMissing(LedgerState::Meta& meta, std::chrono::system_clock::time_point now, const std::string& file) {
  meta.lost_claims_since_ms = UnixMs(now);
  meta.lost_claims_file = file;
}

bool ClaimsMayBeMissing(const LedgerState::Meta& meta) { return meta.lost_claims_since_ms != 0; }

void ClearClaimsMissing(LedgerState::Meta& meta) {
  meta.lost_claims_since_ms = 0;
  meta.lost_claims_file.clear();
}

}  // namespace nvdra::ledger
