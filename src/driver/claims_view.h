// What a device kind may know of the claims this node holds, its own process's
// and those of every other plugin process on the same ledger: who holds a
// device and in what state, which shares of it are taken, and the kind's own
// record of each claim. The plugin hands a kind this narrow view instead of
// the ledger, so no kind reads or writes the ledger's entries (the engine
// alone does).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ledger/claim_entry.h"
#include "model/claim.h"
#include "util/status.h"

namespace nvdra::driver {

// Where a claim that holds devices is in its life.
enum class HoldState {
  kPreparing,    // its Prepare began and has not completed (or was begun again after a reboot)
  kPrepared,     // its Prepare completed
  kUnpreparing,  // its Unprepare began: on its way out, it gives its devices up soon
};

// One claim that holds devices, as a kind may see it.
struct HeldClaim {
  std::string uid, ns, name;  // ns and name may be empty (a claim rebuilt or imported)
  HoldState state = HoldState::kPreparing;
  std::vector<model::AllocationResult> allocation;             // its results for this driver
  std::vector<std::string> devices;                            // the devices its Prepare returned
  std::vector<ledger::HeldShare> shares;                       // the shares of devices it holds
  nlohmann::json undo;                                         // the kind's own record of the claim
  ledger::ClaimOrigin origin = ledger::ClaimOrigin::kPrepare;  // where `undo` came from
};

class ClaimsView {
 public:
  virtual ~ClaimsView() = default;

  // Every claim that holds devices now, fresh (other processes' included).
  virtual Result<std::vector<HeldClaim>> HeldClaims() const = 0;
  // The claims other than `except_uid` that hold `resource` (a device name,
  // e.g. "gpu-0"), in the order they took it.
  virtual Result<std::vector<HeldClaim>> HoldersOf(const std::string& resource,
                                                   const std::string& except_uid = "") const = 0;

  // Whether a claim other than `claim_uid` holds `device` and is not being
  // unprepared. A view that cannot be read says yes (the device is then
  // treated as shared, the safe answer for a setting all holders share).
  bool SharedWithOthers(const std::string& device, const std::string& claim_uid) const;
  // Whether a claim that is not being unprepared has `device` of `driver`
  // among its allocation results. A view that cannot be read says no.
  bool PreparedByLiveClaim(const std::string& device, const std::string& driver) const;
};

}  // namespace nvdra::driver
