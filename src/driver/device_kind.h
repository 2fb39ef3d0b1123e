// One kind of device (GPUs and MIG devices, or IMEX channels and daemons)
// as the shared claim engine sees it: what it publishes, how it checks a
// claim before anything durable happens, how it prepares a claim's devices,
// and how it undoes them from the ledger's record alone. Adding MPS, VFIO or
// dynamic MIG means extending a kind, not the engine.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cdi/spec.h"
#include "config/config_resolver.h"
#include "devices/device_health.h"
#include "driver/claim_source.h"
#include "ledger/claim_entry.h"
#include "model/published_device.h"
#include "util/status.h"

namespace nvdra::driver {

// A claim's results for this driver with their resolved configs.
struct ClaimWork {
  std::string uid, ns, name;
  std::vector<AllocatedResult> results;         // ours only, in claim order
  std::vector<config::ConfigGroup> groups;      // resolved, validated configs
};

// Decided before the first durable write.
struct ClaimPlan {
  // Exclusive resources the claim holds while prepared, e.g. "gpu-0" or
  // "channel 3". Empty: the engine uses the non-admin device names.
  std::vector<std::string> held;
  // Kind-specific record written with PrepareStarted, so that an Unprepare
  // after a crash knows what the prepare may have touched.
  nlohmann::json undo;
};

struct PreparedClaim {
  std::vector<ledger::PreparedDevice> devices;  // one per result, CDI ids filled
  cdi::Spec spec;                               // the claim's CDI spec; no devices: no file
  nlohmann::json undo;                          // complete undo record
};

class DeviceKind {
 public:
  virtual ~DeviceKind() = default;

  virtual std::string driver_name() const = 0;

  // "gpu", "mig", "channel", "daemon", ...; "" for a device we do not have.
  virtual std::string DeviceType(const std::string& device) const = 0;

  // The device_type label values of nvidia_dra_prepared_devices this kind
  // reports (upstream's set, pre-created at zero).
  virtual std::vector<std::string> MetricDeviceTypes() const = 0;

  // Devices for this node's ResourceSlice pool.
  virtual std::vector<model::PublishedDevice> PublishedDevices() const = 0;

  // Validates the claim against the hardware and its configs and says what
  // it will hold. Errors here are permanent for the claim and leave no
  // ledger entry.
  virtual Result<ClaimPlan> Plan(const ClaimWork& work) = 0;

  // Gates that must hold before the prepare starts (e.g. the ComputeDomain
  // is ready on this node). Returns quickly; a not-ready state is a
  // retryable error, never a wait that could block other claims.
  virtual Status CheckReady(const ClaimWork& work, const ClaimPlan& plan) { return Status::Ok(); }

  // Does the node-side work. `previous_undo` is the record of an earlier
  // attempt (a retry after a failure or crash, or a redo after a reboot) or
  // null. Must be idempotent: it may run again for the same claim.
  virtual Result<PreparedClaim> Prepare(const ClaimWork& work, const ClaimPlan& plan,
                                        const nlohmann::json& previous_undo) = 0;

  // The CDI spec of an already prepared claim, rebuilt from its ledger entry
  // (the CDI directory is often tmpfs: a repeated Prepare re-ensures it).
  virtual Result<cdi::Spec> RebuildSpec(const ledger::ClaimEntry& entry) = 0;

  // Whether this kind's devices have hardware health (the plugin then runs
  // the device layer's health source and feeds OnHealthEvent).
  virtual bool MonitorsDeviceHealth() const { return false; }
  // A health event for one of our devices. Returns true when what
  // PublishedDevices() returns changed (e.g. a taint was added or cleared).
  virtual bool OnHealthEvent(const devices::DeviceHealthEvent& event) { return false; }

  // Undoes what Prepare recorded in `undo`. Works from the record alone (no
  // API server) and never fails on a record it cannot fully parse: what
  // cannot be understood is logged and skipped.
  virtual Status Unprepare(const ledger::ClaimEntry& entry) = 0;
};

}  // namespace nvdra::driver
