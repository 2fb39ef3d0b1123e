// Engine::RewriteClaimSpecs: the prepared claims' CDI specs rebuilt after a
// driver reload, apart from the per-claim path so that path stays lean.
#include <chrono>

#include "driver/engine.h"
#include "util/log.h"

namespace nvdra::driver {

int Engine::RewriteClaimSpecs(int* errors) {
  auto entries = ledger_.List();
  if (!entries.ok()) {
    NVDRA_ERROR("rewriting CDI specs: {}", entries.status().message());
    if (errors != nullptr) ++*errors;
    return 0;
  }
  int rewritten = 0;
  auto fail = [errors](const model::ClaimRef& ref, const Status& s) {
    NVDRA_ERROR("CDI spec of claim {} not rewritten (it names the previous driver's files until its next "
                "Prepare): {}",
                ref.ToString(), s.message());
    if (errors != nullptr) ++*errors;
  };
  for (const auto& listed : *entries) {
    if (listed.state != ledger::ClaimState::kPrepareCompleted) continue;
    const model::ClaimRef ref{listed.ns, listed.uid, listed.name};
    // Under the claim's lock, so an Unprepare meanwhile never sees its
    // spec written back after it removed it.
    auto lock = LockClaim(listed.uid, std::chrono::steady_clock::now() + std::chrono::seconds(10));
    if (!lock.ok()) {
      fail(ref, lock.status());
      continue;
    }
    auto entry = ledger_.Get(listed.uid);
    if (!entry.ok() || !*entry || (*entry)->state != ledger::ClaimState::kPrepareCompleted) continue;
    const ledger::ClaimEntry& e = **entry;
    std::vector<std::string> names;
    for (const auto& d : e.prepared) names.push_back(d.device);
    auto edits = kind_.Edits(e.undo, names);
    if (!edits.ok()) {
      fail(ref, edits.status());
      continue;
    }
    ClaimOutput output = BuildClaimOutput(cdi_, e.uid, e.allocation, *edits, e.ns, e.name);
    if (output.spec.devices.empty()) continue;
    if (Status s = cdi_.WriteClaimSpec(e.uid, output.spec); !s.ok()) {
      fail(ref, s);
      continue;
    }
    ++rewritten;
  }
  return rewritten;
}

}  // namespace nvdra::driver
