#include "driver/claim_recovery.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "driver/claim_output.h"
#include "ledger/claim_transitions.h"
#include "util/log.h"

namespace nvdra::driver {

Result<bool> ClaimRecovery::RecoverLostClaims() {
  NVDRA_ASSIGN_OR_RETURN(bool missing, ledger_.ClaimsMayBeMissing());
  if (!missing) return true;
  NVDRA_ASSIGN_OR_RETURN(std::vector<std::string> uids, cdi_.ListClaimSpecUids());
  // Specs that name their claim first: when two specs name one device (a
  // spec copied under another UID, a claim deleted and its device given to
  // the next), the one the API server can vouch for wins, and the other is
  // an orphan the sweep removes once the recovery is over.
  std::vector<std::pair<std::string, Result<cdi::CdiSpecWriter::ClaimSpecContents>>> specs;
  for (const auto& uid : uids) specs.emplace_back(uid, cdi_.ReadClaimSpec(uid));
  std::stable_partition(specs.begin(), specs.end(),
                        [](const auto& s) { return s.second.ok() && !s.second->name.empty(); });
  int failed = 0;
  for (const auto& [uid, contents] : specs) {
    Status s = RebuildFromSpec(uid);
    if (!s.ok()) {
      NVDRA_WARN("ledger recovery: claim {}: {}", uid, s.message());
      failed++;
    }
  }
  if (failed > 0) return false;  // the next pass tries again; no spec is swept meanwhile
  NVDRA_RETURN_IF_ERROR(ledger_.FinishRecovery());
  NVDRA_INFO("ledger recovery finished: {} claim spec(s) checked; the ledger is the truth again", uids.size());
  return true;
}

Status ClaimRecovery::RebuildFromSpec(const std::string& uid) {
  NVDRA_ASSIGN_OR_RETURN(ClaimLock lock, locks_.Lock(uid, std::chrono::steady_clock::now() + std::chrono::seconds(10)));
  NVDRA_ASSIGN_OR_RETURN(auto entry, ledger_.Get(uid));
  if (entry && ledger::HoldsResources(entry->state)) return Status::Ok();
  auto spec = cdi_.ReadClaimSpec(uid);
  if (!spec.ok() && spec.status().code() == StatusCode::kNotFound) return Status::Ok();  // removed meanwhile
  if (!spec.ok() && spec.status().code() == StatusCode::kInvalidArgument) {
    // No claim can be read out of it, now or later: it holds nothing, and
    // the sweep removes it once the recovery is over.
    NVDRA_WARN("ledger recovery: skipping claim {}: {}", uid, spec.status().message());
    return Status::Ok();
  }
  NVDRA_RETURN_IF_ERROR(spec.status());
  const std::vector<std::string>& devices = spec->devices;
  if (devices.empty()) return Status::Ok();  // names no device of the claim: nothing it could hold
  ledger::RebuiltClaim c;
  c.uid = uid;
  c.ns = spec->ns;
  c.name = spec->name;
  c.devices = devices;
  for (const auto& d : devices) c.cdi_device_ids.push_back(cdi_.DeviceId(uid, d));
  c.held = ledger::HeldByDevices(&kind_.codec(), devices);
  c.source = "cdi spec";
  Status rebuilt = ledger_.RebuildEntry(c);
  if (rebuilt.code() == StatusCode::kConflict && !c.name.empty()) {
    // Rebuilt before from a spec whose claim the API server no longer has
    // (a copy made under another UID, a deleted claim): that holder goes.
    if (clear_stale_(ledger::RebuiltHeld(c), uid)) rebuilt = ledger_.RebuildEntry(c);
  }
  if (rebuilt.code() == StatusCode::kConflict) {
    // A claim prepared since (or rebuilt before, from a spec that names its
    // claim) holds its device: that one is the truth, and this spec an
    // orphan the sweep removes once the recovery is over.
    NVDRA_WARN("ledger recovery: not rebuilding claim {}: {}", uid, rebuilt.message());
    return Status::Ok();
  }
  NVDRA_RETURN_IF_ERROR(rebuilt);
  if (c.name.empty()) {
    NVDRA_WARN("ledger recovery: rebuilt claim {} from its CDI spec ({} device(s)); the spec does not name the "
               "claim, so the reconciler releases it after the grace period (--completed-claim-grace) unless a "
               "Prepare or Unprepare of it comes first",
               uid, devices.size());
  } else {
    NVDRA_WARN("ledger recovery: rebuilt claim {}/{} ({}) from its CDI spec ({} device(s)); its next Prepare or "
               "Unprepare completes the entry, and the reconciler checks it meanwhile",
               c.ns, c.name, uid, devices.size());
  }
  return Status::Ok();
}

int ClaimRecovery::RewriteClaimSpecs(int* errors) {
  auto entries = ledger_.List();
  if (!entries.ok()) {
    NVDRA_ERROR("rewriting CDI specs: {}", entries.status().message());
    if (errors != nullptr) ++*errors;
    return 0;
  }
  int rewritten = 0;
  for (const auto& listed : *entries) {
    if (listed.state != ledger::ClaimState::kPrepareCompleted) continue;
    Result<bool> r = RewriteClaimSpec(listed);
    if (r.ok()) {
      if (*r) ++rewritten;
    } else {
      NVDRA_ERROR("CDI spec of claim {} not rewritten (it names the previous driver's files until its next "
                  "Prepare): {}",
                  model::ClaimRef{listed.ns, listed.uid, listed.name}.ToString(), r.status().message());
      if (errors != nullptr) ++*errors;
    }
  }
  return rewritten;
}

// False: nothing to rewrite (the claim went, or its kind gives no edits).
Result<bool> ClaimRecovery::RewriteClaimSpec(const ledger::ClaimEntry& listed) {
  // Under the claim's lock, so an Unprepare meanwhile never sees its spec
  // written back after it removed it.
  NVDRA_ASSIGN_OR_RETURN(ClaimLock lock,
                         locks_.Lock(listed.uid, std::chrono::steady_clock::now() + std::chrono::seconds(10)));
  auto entry = ledger_.Get(listed.uid);
  if (!entry.ok() || !*entry || (*entry)->state != ledger::ClaimState::kPrepareCompleted) {
    return false;
  }
  const ledger::ClaimEntry& e = **entry;
  std::vector<std::string> names;
  for (const auto& d : e.prepared) names.push_back(d.device);
  NVDRA_ASSIGN_OR_RETURN(ClaimEdits edits, kind_.Edits(e.undo, names));
  ClaimOutput output = BuildClaimOutput(cdi_, e.uid, e.allocation, std::move(edits), e.ns, e.name);
  if (output.spec.devices.empty()) return false;
  NVDRA_RETURN_IF_ERROR(cdi_.WriteClaimSpec(e.uid, output.spec));
  return true;
}

}  // namespace nvdra::driver
