#include "driver/orphan_sweeper.h"

#include <vector>

#include "util/failpoint.h"
#include "util/log.h"

namespace nvdra::driver {

Result<bool> OrphanSweeper::HoldsNothing(const std::string& uid) {
  NVDRA_ASSIGN_OR_RETURN(auto entry, ledger_.Get(uid));
  return !entry.has_value() || !ledger::HoldsResources(entry->state);
}

Result<bool> OrphanSweeper::RemoveOrphanSpec(const std::string& uid) {
  // Check and delete as one step against every process: a claim another
  // operation is working on is not an orphan now (its spec may be the one
  // being written); a later pass looks again.
  NVDRA_ASSIGN_OR_RETURN(std::optional<ClaimLock> lock, locks_.LockIfIdle(uid));
  if (!lock) return false;
  NVDRA_ASSIGN_OR_RETURN(bool orphan, HoldsNothing(uid));
  if (!orphan) return false;
  NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT("engine-before-orphan-spec-remove"));
  NVDRA_RETURN_IF_ERROR(cdi_.RemoveClaimSpec(uid));
  NVDRA_INFO("removed orphan CDI spec of claim {} (no live ledger entry)", uid);
  return true;
}

int OrphanSweeper::Sweep(const std::set<std::string>& live, int* errors) {
  int removed = 0;
  auto uids = cdi_.ListClaimSpecUids();
  if (!uids.ok()) {
    NVDRA_WARN("reconcile: list CDI specs: {}", uids.status().message());
    (*errors)++;
    return 0;
  }
  for (const auto& uid : *uids) {
    if (live.count(uid)) continue;
    auto r = RemoveOrphanSpec(uid);
    if (!r.ok()) {
      (*errors)++;
    } else if (*r) {
      removed++;
    }
  }
  removed += SweepOrphanMetadata(live, errors);
  // Then temp files a crashed write left behind. The ledger records a claim
  // before its spec is written, so a write in flight belongs to a claim the
  // ledger knows (in any state): its files stay. The specs left are those of
  // live claims (or ones that became live since): all known, all kept.
  auto swept = cdi_.SweepOrphanClaimSpecs([this](const std::string& uid) {
    auto e = ledger_.Get(uid);
    return !e.ok() || e->has_value();
  });
  if (!swept.ok()) {
    NVDRA_WARN("reconcile: sweep CDI temp files: {}", swept.status().message());
    (*errors)++;
  } else {
    removed += static_cast<int>(swept->size());
  }
  return removed;
}

int OrphanSweeper::SweepOrphanMetadata(const std::set<std::string>& live, int* errors) {
  if (metadata_ == nullptr) return 0;
  std::vector<std::string> stale;
  auto uids = metadata_->ListUids(&stale);
  if (!uids.ok()) {
    NVDRA_WARN("reconcile: list device metadata: {}", uids.status().message());
    (*errors)++;
    return 0;
  }
  int removed = 0;
  for (const auto& uid : *uids) {
    if (live.count(uid)) continue;
    // Check and delete as one step against every process, as for the
    // claim's CDI spec: a claim being prepared is not an orphan.
    auto lock = locks_.LockIfIdle(uid);
    if (!lock.ok() || !lock->has_value()) continue;
    auto orphan = HoldsNothing(uid);
    if (!orphan.ok() || !*orphan) continue;
    Status s = metadata_->RemoveAllOf(uid);
    if (!s.ok()) {
      NVDRA_WARN("reconcile: remove device metadata of claim {}: {}", uid, s.message());
      (*errors)++;
      continue;
    }
    NVDRA_INFO("removed orphan device metadata of claim {} (no live ledger entry)", uid);
    removed++;
  }
  // A request directory whose file never got written (a crash between its
  // mkdir and the rename), long enough ago that no write is in flight.
  for (const auto& dir : stale) {
    if (!metadata_->RemoveRequestDir(dir).ok()) (*errors)++;
  }
  return removed;
}

}  // namespace nvdra::driver
