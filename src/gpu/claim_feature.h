// A per-claim feature of the GPU kind, as a plug-in: a device type, a
// sharing strategy, or a claim-wide step (the list is in gpu_handlers.cc and
// docs/architecture.md). GpuKind knows none of them:
// it runs the plug-ins registered in gpu_handlers.cc (each with the gate
// that enables it) in their order at every step of a claim:
//   publish:   Devices() adds the devices a device type serves; Decorate()
//              adds to how any device is published;
//   Plan:      before anything durable, what Prepare will do, written into
//              the plug-in's own piece of the undo record (gpu_undo.h);
//   Apply:     doing it (idempotent: it runs again after a failure, a crash
//              or a reboot); it may complete its piece;
//   AwaitReady: optional, without the claim's locks;
//   AddEdits:  what the claim's containers get beyond their devices' own;
//   Undo:      reversing it from its piece alone, in the reverse order, also
//              for a plug-in whose gate is now off (the record still has it);
//   sweep:     removing what no undo record owns (a claim gone while the
//              plugin was down), at start and periodically.
// docs/architecture.md walks through adding one.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cdi/container_edits.h"
#include "config/config_resolver.h"
#include "devices/device_health.h"
#include "driver/device_kind.h"
#include "gpu/gpu_container_edits.h"
#include "gpu/gpu_device_type.h"
#include "gpu/gpu_undo.h"
#include "ledger/claim_entry.h"
#include "model/published_device.h"
#include "util/status.h"

namespace nvdra::gpu {

// The claim a plug-in plans for, as GpuKind sees it.
class ClaimPlanning : public GpuDeviceLookup {
 public:
  virtual const driver::ClaimWork& work() const = 0;
  // The claim's devices of `type`, each once, by name.
  virtual std::vector<const GpuDevice*> DevicesOf(const GpuDeviceType* type) const = 0;
  // `name` as the slice publishes it (null: not one of this kind's devices).
  virtual const model::PublishedDevice* Published(const std::string& name) const = 0;
};

// A claim's container edits while the plug-ins add to them: each device's
// own (from its type) first, and the claim-wide ones.
struct ClaimEditsDraft {
  struct Device {
    const GpuDevice* device;
    cdi::ContainerEdits edits;
  };
  std::vector<Device> devices;
  // Unset: GpuContainerEdits::Common.
  std::optional<cdi::ContainerEdits> common;
};

// A claim's undo record as a sweep reads it, with where the record came
// from: one imported from the Go driver's checkpoint or rebuilt from a CDI
// spec may hold what it does not name. A tombstone's record is null.
struct HeldRecord {
  // Implicit from a record alone (one this plugin prepared), as tests list them.
  HeldRecord(nlohmann::json u = nullptr, ledger::ClaimOrigin o = ledger::ClaimOrigin::kPrepare)
      : undo(std::move(u)), origin(o) {}
  nlohmann::json undo;
  ledger::ClaimOrigin origin;
};

// The ledger's undo records (of every claim), read when a sweep asks.
using UndoRecords = std::function<Result<std::vector<HeldRecord>>()>;

// How a plug-in's sweep runs: its name (logs), whether at start too, and
// its period where not the reconciler's.
struct FeatureSweep {
  std::string name;
  bool run_at_start = true;
  std::optional<std::chrono::milliseconds> period;
};

class ClaimFeature {
 public:
  virtual ~ClaimFeature() = default;

  // What the plug-in is, for logs.
  virtual std::string_view name() const = 0;

  // Publishing. The devices this plug-in serves (a device type), pointing
  // into `inventory`, which outlives them.
  virtual std::vector<GpuDevice> Devices(const devices::NodeInventory& inventory) const { return {}; }
  // Adds to how `device` is published (after its type published it).
  virtual void Decorate(const GpuDevice& device, model::PublishedDevice& published) const {}
  // Whether the device metadata file of `device` carries its published
  // attributes.
  virtual bool PublishesMetadata(const GpuDevice& device) const { return false; }
  // Adds to the published list as a whole (after the health taints).
  virtual void DecoratePublished(std::vector<model::PublishedDevice>& devices) const {}
  // The plug-in's own reports of device health (null: none).
  virtual std::unique_ptr<devices::DeviceHealthSource> NewHealthSource() { return nullptr; }
  // Work the plug-in owes and retries in the background, now (tests).
  virtual Status RunOwedWork() { return Status::Ok(); }
  // The device types this plug-in serves with their config kinds and
  // defaults (only when enabled), and the types the metrics count (always).
  virtual void AddConfigRules(const config::FeatureGates& gates, config::DriverConfigRules& rules) const {}
  virtual void AddMetricDeviceTypes(std::vector<std::string>& types) const {}

  // The sharing.strategy this plug-in serves ("" for none): a config group
  // naming a strategy no enabled plug-in serves is refused.
  virtual std::string_view sharing_strategy() const { return {}; }

  // The codec of the plug-in's piece of the undo record; null: none.
  virtual const UndoPieceCodec* undo_piece() const { return nullptr; }
  // Fills in what a record imported from the Go driver's checkpoint leaves
  // out of the plug-in's piece.
  virtual void CompleteImported(GpuUndo& undo) const {}

  // A claim's steps (see above). An error from Plan refuses the claim
  // (permanent unless retryable); Plan may add to the ledger's `plan` too.
  virtual Status Plan(const ClaimPlanning& claim, GpuUndo& undo, driver::ClaimPlan& plan) const { return Status::Ok(); }
  virtual Status Apply(const std::string& claim_uid, GpuUndo& undo) { return Status::Ok(); }
  // Whether AwaitReady has something to wait for in `undo`.
  virtual bool HasWait(const GpuUndo& undo) const { return false; }
  virtual Status AwaitReady(const GpuUndo& undo, std::chrono::steady_clock::time_point deadline) {
    return Status::Ok();
  }
  virtual Status AddEdits(const GpuUndo& undo, const GpuContainerEdits& edits, ClaimEditsDraft& draft) const {
    return Status::Ok();
  }
  // Tries every item even when one fails, and answers the first failure.
  virtual Status Undo(const std::string& claim_uid, const GpuUndo& undo) { return Status::Ok(); }

  // The plug-in's orphan sweep; nullopt: none (or none while it is set up as it is).
  virtual std::optional<FeatureSweep> sweep() const { return std::nullopt; }
  // One pass: removes what no record of `records()` (read after looking at
  // the node) owns; `at_start`: the first pass since the plugin started.
  // Returns how many things it removed.
  virtual Result<int> SweepOrphans(const UndoRecords& records, bool at_start) { return 0; }
};

// A plug-in as registered: whether its gate is on. A plug-in that is off
// still undoes what its piece of a record says.
struct RegisteredFeature {
  std::unique_ptr<ClaimFeature> feature;
  bool enabled = true;
};
using FeatureList = std::vector<RegisteredFeature>;

}  // namespace nvdra::gpu
