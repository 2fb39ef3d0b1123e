// KindCodec: what the ledger's import and export of the Go driver's
// checkpoint.json must know about one device kind, asked through this port
// so that src/ledger/ names no driver, device or config of its own. Each kind
// implements it (gpu/gpu_checkpoint_codec.h,
// computedomain/compute_domain_checkpoint_codec.h); the plugins pass theirs in
// LedgerOptions::codec.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ledger/claim_entry.h"

namespace nvdra::ledger {

class KindCodec {
 public:
  virtual ~KindCodec() = default;

  // The DRA driver name: the allocation results an import keeps.
  virtual std::string driver_name() const = 0;

  // The exclusive resources a (non-admin) device holds, named as the kind's
  // Plan names them. `config_parameters`: the opaque "parameters" objects of
  // the claim's configs that apply to the device's request, lowest
  // precedence first; empty where none are known (a CDI spec's device names).
  virtual std::vector<std::string> HeldResources(const std::string& device,
                                                 const std::vector<nlohmann::json>& config_parameters) const = 0;

  // The upstream ResourceClaimStatus "allocation.devices.config" members for
  // a native entry, comma-joined JSON in Go's encoding (go_json.h); "" for
  // none.
  virtual std::string UpstreamConfigs(const ClaimEntry& e) const { return ""; }

  // The upstream "preparedDevices" groups the Go driver would have written
  // for a native entry with prepared devices, or nullopt when they cannot be
  // represented to it (the export then leaves the claim half prepared there).
  virtual std::optional<std::string> UpstreamPreparedDevices(const ClaimEntry& e) const = 0;
};

// The resources held by `devices` named without configs, sorted and unique
// (a claim rebuilt from its CDI spec). Without a codec: the device names.
std::vector<std::string> HeldByDevices(const KindCodec* codec, const std::vector<std::string>& devices);

}  // namespace nvdra::ledger
