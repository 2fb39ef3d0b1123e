// KindCodec: what the ledger's import and export of the Go driver's
// checkpoint.json must know about one device kind, asked through this port
// so that src/ledger/ names no driver, device or config of its own. Each kind
// implements it (gpu/gpu_checkpoint_codec.h,
// computedomain/compute_domain_checkpoint_codec.h); the plugins pass theirs in
// LedgerOptions::codec.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ledger/claim_entry.h"

namespace nvdra::ledger {

// The releases of the Go driver a checkpoint export is written for. Each
// marshals its checkpoint a little differently (boot id, omitempty fields),
// and it verifies a file by re-marshalling what it decoded: an export holds
// exactly the bytes its release writes, or that release refuses it as
// corrupt. Ordered oldest first.
enum class UpstreamRelease {
  kV25_12_0,  // no nodeBootID; CheckpointedDevice without ShareID/Metadata
  kV0_4_0,    // nodeBootID; ShareID/Metadata omitempty
  kV0_4_1,    // + configState.timeSliceApplied (omitempty)
  kMain,      // + configState.mpsApplied; mpsControlDaemonID omitempty
};
inline constexpr UpstreamRelease kLatestUpstreamRelease = UpstreamRelease::kV0_4_1;
// "v25.12.0", "v0.4.0", "v0.4.1", "main".
const char* UpstreamReleaseName(UpstreamRelease r);
// The release a name gives (a leading "v" optional); nullopt for another.
std::optional<UpstreamRelease> ParseUpstreamRelease(std::string_view name);
// "v25.12.0, v0.4.0, v0.4.1, main": for help and errors.
std::string UpstreamReleaseNames();

// One device of a group the Go driver prepared, as its checkpoint names it.
struct UpstreamPreparedDevice {
  // The group member it sits under ("gpu", "mig", "vfio", "channel",
  // "daemon"); "" in the oldest ComputeDomain format, which has no members.
  std::string type;
  nlohmann::json member;  // that member as written ({"info": ..., "device": ...}); keys as Go matches them
  PreparedDevice device;
};

struct UpstreamPreparedGroup {
  std::vector<UpstreamPreparedDevice> devices;
  nlohmann::json config_state;  // "configState" as written; null when absent
};

// What the import read of one upstream claim, for the kind's undo record.
struct UpstreamClaim {
  std::vector<UpstreamPreparedGroup> groups;
  // Per allocation request: the opaque "parameters" of the claim's configs
  // that apply to it, lowest precedence first.
  std::map<std::string, std::vector<nlohmann::json>> config_parameters;
  const std::vector<nlohmann::json>& ParametersFor(const std::string& request) const;
};

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

  // A group's "configState" (raw JSON, as the codec or the Go driver wrote
  // it) as `release` marshals it: its fields in that release's order, with
  // its omissions, fields it does not know left out. The default keeps it.
  virtual std::string UpstreamConfigState(std::string_view raw, UpstreamRelease release) const {
    return std::string(raw);
  }

  // The kind's own undo record for a claim imported from the Go driver's
  // checkpoint (`e`: the entry the import made, with its allocation and
  // prepared devices), so the kind undoes what the Go driver did (a
  // time slice it set, the node label of a domain's channel) and rebuilds
  // the claim's CDI edits as for one it prepared. An object; the import adds
  // the upstream claim to it (legacyCheckpoint, legacyCheckpointJson) for
  // an export. Null: the kind keeps nothing of its own.
  virtual nlohmann::json ImportUndo(const ClaimEntry& e, const UpstreamClaim& claim) const { return nullptr; }

  // The shares (consumable shares) a claim imported from the Go driver's
  // checkpoint holds: one per allocation result of `e` with a share id, its
  // consumedCapacity in base units, so that the ledger's rule counts them
  // against a new share of the device. The checkpoint keeps neither what the
  // device published nor the resolved sharing configuration, so `capacity`
  // stays empty and `sharing` empty, which the rule reads as not known.
  // Default: none (a kind without shares).
  virtual std::vector<HeldShare> ImportHeldCapacity(const ClaimEntry& e) const { return {}; }

  // The words that refuse a claim because another live claim, `holder`,
  // holds `resource` (one of the names HeldResources or the kind's Plan
  // gives). `requested`: the devices the refused claim asked for, admin
  // access excepted, so that a kind can tell its device held twice from a
  // resource two different devices share. The default is the ledger's own
  // sentence, DefaultHeldByAnotherClaim.
  virtual std::string HeldByAnotherClaim(const std::string& resource, const std::string& holder,
                                         const std::vector<std::string>& requested) const;
};

// "<resource> already allocated by claim <holder> (according to checkpoint)".
std::string DefaultHeldByAnotherClaim(const std::string& resource, const std::string& holder);
// Upstream's words for both of its checks, as its plugins say them: a device
// the claim requested is "requested device <resource> is already allocated
// to different claim <holder>" (its overlap check); anything else the
// default sentence (its checkpoint check). Kinds that speak as upstream's
// plugins return this from HeldByAnotherClaim.
std::string UpstreamHeldByAnotherClaim(const std::string& resource, const std::string& holder,
                                       const std::vector<std::string>& requested);

// The resources held by `devices` named without configs, sorted and unique
// (a claim rebuilt from its CDI spec). Without a codec: the device names.
std::vector<std::string> HeldByDevices(const KindCodec* codec, const std::vector<std::string>& devices);

}  // namespace nvdra::ledger
