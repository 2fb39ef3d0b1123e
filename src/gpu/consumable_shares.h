// Consumable shares (the ConsumableShares gate, --consumable-shares): GPUs
// and MIG devices are published with allowMultipleAllocations and request
// policies on their capacity, as upstream publishes them, so the scheduler
// may allocate one device to several claims, each allocation result with a
// share id and the capacity it consumes. This file holds the mode, the
// publishing, and what a claim's shares record in the ledger, where the
// rule that admits or refuses them runs (ledger::CheckHeldAgainstOthers).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "config/feature_gates.h"
#include "driver/claims_view.h"
#include "driver/device_kind.h"
#include "gpu/sharing_strategy.h"
#include "ledger/claim_entry.h"
#include "model/published_device.h"
#include "util/status.h"

namespace nvdra::gpu {

enum class ConsumableSharesMode {
  kDisabled,   // devices are allocated to one claim at a time
  kMemory,     // a claim consumes all memory unless it asks for less
  kUnlimited,  // a claim consumes no memory unless it asks for some
  kCount,      // as kUnlimited, plus a `shares` capacity of `count`; a claim consumes one share by default
};

struct ConsumableShares {
  ConsumableSharesMode mode = ConsumableSharesMode::kDisabled;
  int64_t count = 0;  // kCount only
  // Whether devices are published for sharing and claims may share them.
  bool enabled() const { return mode != ConsumableSharesMode::kDisabled; }
  friend bool operator==(const ConsumableShares&, const ConsumableShares&) = default;
};

// The answer from the node's claims (`claims` must outlive it): another
// claim holds the device and its Unprepare has not begun, so two sharers
// released together both reset (each one's reset is the same). Claims that
// cannot be read count as in use: the setting the sharers agreed on is left
// alone (ClaimsView::SharedWithOthers).
DeviceSharedWithOthers SharedWithOthersIn(const driver::ClaimsView& claims);

// The --consumable-shares (CONSUMABLE_SHARES) value: "disabled", "memory",
// "unlimited" or a positive integer. Errors in upstream's words:
//   --consumable-shares requires feature gate ConsumableShares to be enabled
//   invalid value for --consumable-shares: "x" (must be 'disabled', 'memory', 'unlimited', or a positive integer)
Result<ConsumableShares> ParseConsumableShares(std::string_view flag, const config::FeatureGates& gates);

// Publishes `device` for sharing under `shares`, as upstream's
// applyConsumableShares: allowMultipleAllocations; the memory capacity
// rounded down to a multiple of 1Mi, with the request policy of the mode
// (memory: default all of it, min 1Mi; unlimited and a count: default 0,
// min 0; max the capacity, step 1Mi); with a count, a `shares` capacity of
// that count (default 1, min 1, max the count, step 1). Unchanged when
// disabled.
void ApplyConsumableShares(model::PublishedDevice& device, const ConsumableShares& shares);

// What the claim's shared devices record in the ledger: one HeldShare per
// allocation result with a share id, on a device `published` knows (as the
// slice publishes it), with the consumedCapacity of the result parsed
// (InvalidArgument naming the result when a quantity does not parse), the
// device's published capacity, and the canonical JSON of the config group
// the result is in as its sharing configuration. A result without a share id
// holds its device alone. An amount below what the device's request policy
// admits (negative, or zero where the minimum is above zero) is
// InvalidArgument naming the claim, the device, the capacity and the amount.
Result<std::vector<ledger::HeldShare>> PlanShares(
    const driver::ClaimWork& work, const std::function<const model::PublishedDevice*(const std::string&)>& published);

}  // namespace nvdra::gpu
