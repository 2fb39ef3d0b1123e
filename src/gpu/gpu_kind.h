// The GPU device kind (driver gpu.nvidia.com): a router over the plug-ins
// registered in gpu_handlers.cc (claim_feature.h). The device types among
// them say which devices the kind publishes; GpuKind runs every enabled
// plug-in at each step of a claim, in the registered order (Undo in
// reverse, also for plug-ins whose gate is off), and keeps the claim's undo
// record (gpu_undo.h), in which each plug-in owns its piece. It knows no
// plug-in by name.
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
#include "gpu/claim_feature.h"
#include "gpu/gpu_checkpoint_codec.h"
#include "gpu/gpu_container_edits.h"
#include "gpu/gpu_device_type.h"
#include "gpu/gpu_device_types.h"
#include "gpu/gpu_handlers.h"
#include "gpu/gpu_undo.h"
#include "gpu/health_taints.h"
#include "util/mutex.h"
#include "util/periodic_worker.h"

namespace nvdra::gpu {

struct GpuKindOptions : GpuFeatureOptions {
  // Which plug-ins are enabled (gpu_handlers.cc).
  config::FeatureGates gates;
  // Whether a claim in the ledger that is not being unprepared has the
  // device in its allocation. A device whose twin (GpuDevice::twin) is
  // prepared is withdrawn from the slice, as upstream withdraws it; null
  // withdraws nothing.
  std::function<bool(const std::string& device)> device_prepared;
  // Plug-ins run after the registered ones, enabled (tests).
  std::function<FeatureList(const FeatureContext&)> more_features;
};

class GpuKind final : public driver::DeviceKind, private GpuDeviceLookup {
 public:
  // `types`: the device types to serve; empty, the registered ones the
  // gates switch on.
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
  // A device's published attributes where a plug-in publishes them in its
  // metadata (as upstream does for passthrough devices); others carry none.
  std::map<std::string, model::AttributeValue> MetadataAttributes(const std::string& device) const override;

  // Publishing port.
  std::vector<model::PublishedDevice> PublishedDevices() const override;
  bool MonitorsDeviceHealth() const override { return true; }
  bool OnHealthEvent(const devices::DeviceHealthEvent& event) override { return taints_.Apply(event); }
  void SetRepublish(std::function<void()> republish) override EXCLUDES(republish_mu_);
  // The plug-ins' own health reports (ClaimFeature::NewHealthSource).
  std::unique_ptr<devices::DeviceHealthSource> NewOwnHealthSource() override;
  // The work the plug-ins owe and retry in the background, now (tests).
  Status RunOwedWorkForTest();
  std::vector<std::string> MetricDeviceTypes() const override;

  // One pass of every enabled plug-in's orphan sweep (ClaimFeature::
  // SweepOrphans) against `undo_records()`; `at_start`: the pass at start.
  // Returns how many things they removed; every sweep runs, and the first
  // failure is the answer.
  Result<int> SweepOrphans(const UndoRecords& undo_records, bool at_start = false);
  // Runs each enabled plug-in's sweep periodically (`worker`: the period and
  // group; the plug-in names it and says whether it runs at start), until
  // the kind is destroyed.
  void StartSweeps(PeriodicWorkerOptions worker, UndoRecords undo_records);

 private:
  struct Feature {
    std::unique_ptr<ClaimFeature> plugin;
    bool enabled;
  };
  GpuCheckpointCodec codec_;
  const GpuDevice* Find(const std::string& device) const override;
  Result<driver::ClaimEdits> EditsFor(const GpuUndo& undo) const;
  // The record as the plug-ins' codecs read it; `imported`: with what an
  // imported record leaves out filled in.
  Result<GpuUndo> Decode(const nlohmann::json& undo_json, bool imported = true) const;
  // A device as the slice publishes it, before health taints.
  model::PublishedDevice Publish(const GpuDevice& device) const;
  std::vector<Feature> Features(std::vector<std::unique_ptr<GpuDeviceType>> types);

  const devices::NodeInventory inventory_;
  const GpuContainerEdits edits_;
  const GpuKindOptions options_;
  devices::GpuControl& control_;
  // Registered order; Undo runs them in reverse.
  const std::vector<Feature> features_;
  UndoPieceCodecs pieces_;
  std::map<std::string, GpuDevice> devices_;  // points into inventory_ and features_
  HealthTaints taints_;
  // Publishes again after a claim with twinned devices changed (the slice
  // withdraws a device whose twin is prepared).
  void RepublishIfTwinned(const std::vector<std::string>& devices) EXCLUDES(republish_mu_);
  Mutex republish_mu_;
  std::function<void()> republish_ GUARDED_BY(republish_mu_);
  // Last: stop before anything they use goes away.
  std::vector<std::unique_ptr<PeriodicWorker>> sweeps_;
};

}  // namespace nvdra::gpu
