// The two ports a device kind (GPUs and MIG devices, IMEX channels and
// daemons, later VFIO passthrough ...) offers the shared core:
//
//   ClaimKind, the engine port: what a claim holds (Plan), whether it may
//   start (CheckReady), the node-side work (Prepare) answered with container
//   edits per device plus common edits and the kind's undo record, the edits
//   of an already prepared claim rebuilt from that record (Edits), and the
//   undo from the record alone (Unprepare).
//
//   DevicePublisher, the publishing port: the devices of this node's
//   ResourceSlice, their health, and the device types the metrics report.
//
// A kind never builds prepared devices, CDI ids or CDI specs and never
// touches the ledger: the engine derives all of them, in one place, from
// what the kind returns. Each kind owns its facts (driver name, device
// types, which opaque config kinds apply), so nothing outside its folder and
// its main.cc names it.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cdi/container_edits.h"
#include "config/config_resolver.h"
#include "config/feature_gates.h"
#include "devices/device_health.h"
#include "ledger/claim_entry.h"
#include "ledger/kind_codec.h"
#include "model/claim.h"
#include "model/published_device.h"
#include "util/status.h"

namespace nvdra::driver {

// A claim's results for this driver with their resolved configs.
struct ClaimWork {
  std::string uid, ns, name;
  std::vector<model::AllocationResult> results;  // ours only, in claim order
  std::vector<config::ConfigGroup> groups;       // resolved, validated configs
  // When the kubelet stops waiting for this claim. CheckReady may wait for a
  // gate up to here (it runs before the claim's lock is taken).
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

// Decided before the first durable write.
struct ClaimPlan {
  // Exclusive resources the claim holds while prepared, e.g. "gpu-0" or
  // "channel 3". Empty: the engine uses the non-admin device names.
  std::vector<std::string> held;
  // The devices the claim holds as a share (consumable shares): others may
  // hold shares of them too, as the ledger's rule admits
  // (ledger::CheckHeldAgainstOthers). Each is held as well.
  std::vector<ledger::HeldShare> shares;
  // The kind's undo record, encoded, written with PrepareStarted so that an
  // Unprepare after a crash knows what the prepare may have touched.
  nlohmann::json undo;
  // The same record as the kind that planned it holds it (`decoded_by`), so
  // that kind's Prepare of this plan does not decode `undo` again. Opaque to
  // every other reader; a kind that finds it absent, or made by another kind
  // (a driver reload between plan and prepare), decodes `undo`.
  std::shared_ptr<const void> decoded_undo;
  const void* decoded_by = nullptr;
};

// The container edits of one device of the claim ("gpu-0", "channel-3").
struct DeviceContainerEdits {
  std::string device;
  cdi::ContainerEdits edits;
};

// What a claim's containers get. A device of the claim without an entry in
// `devices` gets no CDI id; a claim whose `devices` is empty gets no spec.
struct ClaimEdits {
  std::vector<DeviceContainerEdits> devices;
  cdi::ContainerEdits common;  // applied once per container
  // Applied once per container before `common` (each list first), and
  // shared with other claims' edits rather than copied: the driver's
  // files (cdi::Spec::shared_edits).
  std::shared_ptr<const cdi::ContainerEdits> shared_common;
  // CDI ids of devices outside the claim's spec (e.g. a base spec the plugin
  // writes at start) that a device of the claim returns after its own id.
  std::map<std::string, std::vector<std::string>> shared_cdi_ids;
};

struct PreparedClaim {
  ClaimEdits edits;
  nlohmann::json undo;  // the complete undo record, encoded
  // Prepare started something that becomes ready in its own time (an MPS
  // control daemon's pod): the engine calls AwaitReady, with the claim's
  // locks released, before it writes the CDI spec and completes the claim.
  bool await_ready = false;
};

// The engine port.
class ClaimKind {
 public:
  virtual ~ClaimKind() = default;

  virtual std::string driver_name() const = 0;

  // "gpu", "mig", "channel", "daemon", ...; "" for a device we do not have.
  virtual std::string DeviceType(const std::string& device) const = 0;

  // The device types this kind serves and the opaque config kinds that
  // apply to them, lowest precedence first (the config resolver's input).
  virtual config::DriverConfigRules ConfigRules(const config::FeatureGates& gates) const = 0;

  // Validates the claim against the hardware and its configs and says what
  // it will hold. Errors here are permanent for the claim unless retryable,
  // and leave no ledger entry.
  virtual Result<ClaimPlan> Plan(const ClaimWork& work) = 0;

  // Gates that must hold before the prepare starts (e.g. the ComputeDomain
  // is ready on this node). Runs before the claim's lock is taken and before
  // anything durable, so it may wait for a gate up to work.deadline without
  // blocking other claims or an Unprepare of this one; a gate still closed
  // then is a retryable error.
  virtual Status CheckReady(const ClaimWork& work, const ClaimPlan& plan) { return Status::Ok(); }

  // Whether CheckReady may wait for this claim (a ComputeDomain channel
  // claim waits for its IMEX daemon). The engine then refuses a claim whose
  // resources another claim holds according to the ledger before the wait,
  // instead of after it.
  virtual bool MayWaitUntilReady(const ClaimWork& work, const ClaimPlan& plan) const { return false; }

  // Does the node-side work. Must be idempotent: it runs again for the same
  // claim after a failure, a crash or a reboot. The edits it returns are the
  // ones Edits() rebuilds from the returned undo record.
  virtual Result<PreparedClaim> Prepare(const ClaimWork& work, const ClaimPlan& plan) = 0;

  // After a Prepare that asked for it (PreparedClaim::await_ready), without
  // the claim's locks, so that an Unprepare of this claim and other claims
  // are not held up: waits until what Prepare started is ready, up to
  // work.deadline. Not ready then: a retryable error naming what is not
  // (the kubelet's retry runs Prepare, then this wait, again).
  virtual Status AwaitReady(const ClaimWork& work, const nlohmann::json& undo) { return Status::Ok(); }

  // The edits of an already prepared claim, from its undo record (the CDI
  // directory is often tmpfs: a repeated Prepare re-ensures the spec).
  // `prepared_devices` are the device names the ledger recorded, for records
  // that predate the kind's own list (an imported checkpoint).
  virtual Result<ClaimEdits> Edits(const nlohmann::json& undo, const std::vector<std::string>& prepared_devices) = 0;

  // How the ledger names what this kind's devices hold (a claim whose entry
  // was lost is rebuilt from the device names its CDI spec still lists, see
  // Engine::RecoverLostClaims) and describes its claims to the Go driver.
  virtual const ledger::KindCodec& codec() const = 0;

  // Undoes what Prepare recorded in `undo`. Works from the record alone (no
  // API server) and never fails on a record it cannot decode: that is
  // logged and skipped. `claim_uid` is for log lines.
  virtual Status Unprepare(const std::string& claim_uid, const nlohmann::json& undo) = 0;

  // Whether this kind's claims get device metadata files (KEP-5304) while
  // the DeviceMetadata gate is on.
  virtual bool HasDeviceMetadata() const { return false; }
  // The attributes `device` carries in its claim's device metadata file
  // (DeviceMetadata gate, KEP-5304), in ResourceSlice form; empty: none.
  virtual std::map<std::string, model::AttributeValue> MetadataAttributes(const std::string& device) const {
    return {};
  }
};

// For a kind's Unprepare: true (after one warning naming the claim) when its
// undo record could not be decoded, `decoded` being the decoder's status.
// Such a record is skipped, never retried: it cannot be read the next time
// either, and failing would wedge the claim.
bool SkipUnreadableUndo(const std::string& claim_uid, const Status& decoded);

// The publishing port.
class DevicePublisher {
 public:
  virtual ~DevicePublisher() = default;

  // Devices for this node's ResourceSlice pool.
  virtual std::vector<model::PublishedDevice> PublishedDevices() const = 0;

  // Whether this kind's devices have hardware health (the plugin then runs
  // the device layer's health source and feeds OnHealthEvent).
  virtual bool MonitorsDeviceHealth() const { return false; }
  // A health event for one of our devices. Returns true when what
  // PublishedDevices() returns changed (e.g. a taint was added or cleared).
  virtual bool OnHealthEvent(const devices::DeviceHealthEvent& event) { return false; }
  // Health the kind finds out itself rather than from the hardware's events
  // (a GPU whose time-slice reset keeps failing). The source's events say a
  // device's health changed, with PublishedDevices() already reflecting it;
  // the plugin starts it whatever the health flags and stops it before what
  // the events feed. nullptr: the kind has none.
  virtual std::unique_ptr<devices::DeviceHealthSource> NewOwnHealthSource() { return nullptr; }

  // The device_type label values of nvidia_dra_prepared_devices (pre-created
  // at zero), "unknown" included.
  virtual std::vector<std::string> MetricDeviceTypes() const = 0;

  // `republish` publishes PublishedDevices() again; a kind whose devices
  // change with what is prepared (a GPU withdrawn while its passthrough
  // twin is prepared) calls it after such a change. Set once, at start.
  virtual void SetRepublish(std::function<void()> republish) {}
};

// A kind as a plugin binary hands it to the shared wiring: both ports.
class DeviceKind : public ClaimKind, public DevicePublisher {};

}  // namespace nvdra::driver
