// What a claim's containers get, derived from a kind's ClaimEdits: the CDI
// spec and the prepared devices. The engine builds it at Prepare, and again
// from the ledger for a repeated Prepare or a spec rewritten after a driver
// reload (ClaimRecovery), always the same way.
#pragma once

#include <string>
#include <vector>

#include "cdi/cdi_spec_writer.h"
#include "driver/device_kind.h"
#include "model/claim.h"

namespace nvdra::driver {

struct ClaimOutput {
  cdi::Spec spec;                              // no devices: no file
  std::vector<model::PreparedDevice> devices;  // one per result, CDI ids where the kind gave edits
};

// The one place that turns a kind's edits into the CDI spec and the prepared
// devices: devices with edits get the CDI id "<vendor>/<class>=<uid>-<device>".
// With the claim's namespace and name, the spec names the claim too (see
// CdiSpecWriter::BuildClaimSpec).
ClaimOutput BuildClaimOutput(const cdi::CdiSpecWriter& cdi, const std::string& claim_uid,
                             const std::vector<model::AllocationResult>& results, ClaimEdits edits,
                             const std::string& claim_namespace = "", const std::string& claim_name = "");

}  // namespace nvdra::driver
