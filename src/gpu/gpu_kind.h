// The GPU device kind (driver gpu.nvidia.com). The device types it serves
// (full GPUs and static MIG devices: gpu_device_type.h) and the sharing
// strategies it applies (time-slicing, MPS control daemons:
// sharing_strategy.h) are handlers registered in gpu_handlers.cc; GpuKind
// routes a claim's devices and config groups to them. Its undo record
// (gpu_undo.h) says what Unprepare must reverse. With consumable shares on
// (consumable_shares.h) its devices are published for sharing and a plan
// names the shares a claim takes. With Fabric Manager (fabric_partitions.h)
// a claim's full and passthrough GPUs get their NVLink partition.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "devices/device_info.h"
#include "devices/gpu_control.h"
#include "driver/device_kind.h"
#include "gpu/consumable_shares.h"
#include "gpu/fabric_partitions.h"
#include "gpu/gpu_container_edits.h"
#include "gpu/gpu_device_type.h"
#include "gpu/gpu_device_types.h"
#include "gpu/gpu_checkpoint_codec.h"
#include "gpu/gpu_undo.h"
#include "gpu/health_taints.h"
#include "gpu/mps_strategy.h"
#include "gpu/sharing_strategy.h"
#include "gpu/time_slice_resets.h"
#include "gpu/vfio_type.h"
#include "util/mutex.h"
#include "util/periodic_worker.h"

namespace nvdra::gpu {

// The device types this kind serves and the config kinds that apply to
// them, from the device types the gates switch on (gpu_handlers.cc).
config::DriverConfigRules GpuConfigRules(const config::FeatureGates& gates);

struct GpuKindOptions {
  // Which device types are served (gpu_handlers.cc).
  config::FeatureGates gates;
  // Bounded retries of a failing time-slice reset (time_slice_resets.h).
  TimeSliceResetOptions resets;
  // How often a GPU that owes a time-slice reset is retried.
  std::chrono::milliseconds reset_retry_period{30'000};
  // MPS control daemons (mps_strategy.h); without an api, MPS claims fail.
  MpsRuntime mps;
  // --consumable-shares: whether GPUs and MIG devices are published for
  // sharing and claims may hold shares of them (consumable_shares.h). Ask
  // consumable_shares.enabled() whether consumable sharing is on.
  ConsumableShares consumable_shares;
  // Whether another claim still holds a share of a device (from the ledger);
  // used only while consumable sharing is on.
  DeviceSharedWithOthers shared_with_others;
  // Passthrough (PassthroughSupport): the PCI drivers, through sysfs;
  // outlives the kind. Null: passthrough claims fail.
  devices::PciDriverControl* pci = nullptr;
  // What passthrough needs beyond sysfs (vfio_type.h).
  PassthroughHost passthrough;
  // Passthrough: whether a claim in the ledger that is not being
  // unprepared has the device in its allocation. A GPU whose twin is
  // prepared is withdrawn from the slice, as upstream withdraws it; null
  // withdraws nothing.
  std::function<bool(const std::string& device)> device_prepared;
  // Fabric Manager partitions (FabricManagerPartitioning, fabric_partitions.h);
  // null: the gate is off or the node has no fabric that needs them.
  std::shared_ptr<FabricPartitions> fabric;
};

class DynamicMigType;
class VfioType;

class GpuKind final : public driver::DeviceKind, private GpuDeviceLookup {
 public:
  // `types`: the device types to serve; empty, the registered ones the
  // gates switch on (RegisteredDeviceTypes).
  GpuKind(devices::NodeInventory inventory, GpuContainerEdits edits, devices::GpuControl& control,
          GpuKindOptions options = {}, std::vector<std::unique_ptr<GpuDeviceType>> types = {});
  ~GpuKind() override;

  // Engine port.
  std::string driver_name() const override { return kDriverName; }
  const ledger::KindCodec& codec() const override { return codec_; }
  std::string DeviceType(const std::string& device) const override;
  config::DriverConfigRules ConfigRules(const config::FeatureGates& gates) const override;
  Result<driver::ClaimPlan> Plan(const driver::ClaimWork& work) override;
  Result<driver::PreparedClaim> Prepare(const driver::ClaimWork& work, const driver::ClaimPlan& plan) override;
  Status AwaitReady(const driver::ClaimWork& work, const nlohmann::json& undo) override;
  Result<driver::ClaimEdits> Edits(const nlohmann::json& undo,
                                   const std::vector<std::string>& prepared_devices) override;
  Status Unprepare(const std::string& claim_uid, const nlohmann::json& undo) override;
  bool HasDeviceMetadata() const override { return true; }
  // A passthrough device's published attributes, as upstream; other devices
  // carry none.
  std::map<std::string, model::AttributeValue> MetadataAttributes(const std::string& device) const override;

  // Publishing port.
  std::vector<model::PublishedDevice> PublishedDevices() const override;
  bool MonitorsDeviceHealth() const override { return true; }
  bool OnHealthEvent(const devices::DeviceHealthEvent& event) override { return taints_.Apply(event); }
  void SetRepublish(std::function<void()> republish) override EXCLUDES(republish_mu_);
  // GPUs that owe a time-slice reset: reported unhealthy, retried every
  // reset_retry_period until the reset succeeds.
  std::unique_ptr<devices::DeviceHealthSource> NewOwnHealthSource() override;
  // One pass of that retry, now (tests).
  Status RetryOwedResetsForTest() { return resets_.RetryOwed(); }
  std::vector<std::string> MetricDeviceTypes() const override;

  // Deletes this node's MPS control daemons and directories that no undo
  // record of `undo_records()` (the ledger's, read after the listing) owns.
  // Returns how many were removed.
  Result<int> SweepOrphanMpsDaemons(const std::function<Result<std::vector<nlohmann::json>>()>& undo_records);
  // Runs that sweep periodically (`worker`: its period and group), until
  // the kind is destroyed. Nothing when MPS is not set up.
  using UndoRecords = std::function<Result<std::vector<nlohmann::json>>()>;
  void StartMpsSweep(PeriodicWorkerOptions worker, UndoRecords undo_records);
  // Destroys the dynamic MIG devices that no undo record of
  // `undo_records()` (read after the listing) names. Returns how many.
  // With `disable_idle_mig_mode`, GPUs left without MIG devices leave MIG
  // mode (DynamicMigType::SweepOrphans). Nothing without dynamic MIG.
  Result<int> SweepOrphanMigDevices(const UndoRecords& undo_records, bool disable_idle_mig_mode = false);
  // Runs that sweep at once (turning idle MIG mode off, as upstream does at
  // start) and periodically (`worker`), until the kind is destroyed.
  // Nothing without dynamic MIG.
  void StartMigSweep(PeriodicWorkerOptions worker, UndoRecords undo_records);
  // Binds back to nvidia the GPUs found on vfio-pci that no undo record of
  // `undo_records()` names (VfioType::SweepOrphans). Returns how many.
  // Nothing without PassthroughSupport.
  Result<int> SweepOrphanVfioDevices(const UndoRecords& undo_records);
  // Runs that sweep at once and periodically (`worker`), until the kind is
  // destroyed. Nothing without PassthroughSupport.
  void StartVfioSweep(PeriodicWorkerOptions worker, UndoRecords undo_records);
  // Deactivates the Fabric Manager partitions that are active though no
  // undo record of `undo_records()` names them (FabricPartitions::
  // SweepOrphans). Returns how many. Nothing without Fabric Manager.
  Result<int> SweepOrphanFabricPartitions(const UndoRecords& undo_records);
  // Runs that sweep at once and periodically (`worker`), until the kind is
  // destroyed. Nothing without Fabric Manager.
  void StartFabricSweep(PeriodicWorkerOptions worker, UndoRecords undo_records);

 private:
  GpuCheckpointCodec codec_;
  const GpuDevice* Find(const std::string& device) const override;
  SharingStrategy* StrategyNamed(const std::string& name) const;
  Result<driver::ClaimEdits> EditsFor(const GpuUndo& undo) const;
  // DecodeGpuUndo, with what an imported MPS daemon's record leaves out
  // filled in from this plugin's settings.
  Result<GpuUndo> Decode(const nlohmann::json& undo_json) const;
  // A device as the slice publishes it, before health taints.
  model::PublishedDevice Publish(const GpuDevice& device) const;
  // The Fabric Manager partition of the claim's full and passthrough GPUs,
  // into `undo` (fabric_partitions.h).
  Status PlanFabricPartition(const driver::ClaimWork& work, GpuUndo& undo) const;
  Status UndoFabricPartition(const std::string& claim_uid, const GpuUndo& undo) const;

  const devices::NodeInventory inventory_;
  const GpuContainerEdits edits_;
  const GpuKindOptions options_;
  const std::vector<std::unique_ptr<GpuDeviceType>> types_;
  devices::GpuControl& control_;
  std::map<std::string, GpuDevice> devices_;  // points into inventory_ and types_
  HealthTaints taints_;
  // Publishes again after a claim with passthrough twins changed (the slice
  // withdraws a GPU whose twin is prepared).
  void RepublishIfTwinned(const std::vector<std::string>& devices) EXCLUDES(republish_mu_);
  Mutex republish_mu_;
  std::function<void()> republish_ GUARDED_BY(republish_mu_);
  TimeSliceResets resets_;
  std::vector<std::unique_ptr<SharingStrategy>> strategies_;
  MpsStrategy* mps_ = nullptr;  // among strategies_
  DynamicMigType* dynamic_mig_ = nullptr;  // among types_
  VfioType* vfio_ = nullptr;  // among types_
  // Last: stops before anything it uses goes away.
  std::unique_ptr<PeriodicWorker> mps_sweep_;
  std::unique_ptr<PeriodicWorker> mig_sweep_;
  std::unique_ptr<PeriodicWorker> vfio_sweep_;
  std::unique_ptr<PeriodicWorker> fabric_sweep_;
};

}  // namespace nvdra::gpu
