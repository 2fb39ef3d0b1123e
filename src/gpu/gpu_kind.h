// The GPU device kind (driver gpu.nvidia.com): full GPUs and existing (static)
// MIG devices. Prepare applies the claim's sharing settings (time-slicing via
// GpuControl) and answers with each device's container edits; the undo
// record (gpu_undo.h) says what Unprepare must reset.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "devices/device_edits.h"
#include "devices/device_info.h"
#include "devices/gpu_control.h"
#include "driver/device_kind.h"
#include "gpu/gpu_checkpoint_codec.h"
#include "gpu/gpu_undo.h"
#include "gpu/health_taints.h"
#include "gpu/time_slice_resets.h"

namespace nvdra::gpu {

inline constexpr const char* kDriverName = "gpu.nvidia.com";

// The device types this kind serves and the config kinds that apply to
// them: VfioDeviceConfig (with PassthroughSupport), MigDeviceConfig, GpuConfig.
config::DriverConfigRules GpuConfigRules(const config::FeatureGates& gates);

struct GpuKindOptions {
  // Bounded retries of a failing time-slice reset (time_slice_resets.h).
  TimeSliceResetOptions resets;
  // How often a GPU that owes a time-slice reset is retried.
  std::chrono::milliseconds reset_retry_period{30'000};
};

class GpuKind final : public driver::DeviceKind {
 public:
  GpuKind(devices::NodeInventory inventory, devices::DeviceEdits edits, devices::GpuControl& control,
          GpuKindOptions options = {});

  // Engine port.
  std::string driver_name() const override { return kDriverName; }
  const ledger::KindCodec& codec() const override { return codec_; }
  std::string DeviceType(const std::string& device) const override;
  config::DriverConfigRules ConfigRules(const config::FeatureGates& gates) const override {
    return GpuConfigRules(gates);
  }
  Result<driver::ClaimPlan> Plan(const driver::ClaimWork& work) override;
  Result<driver::PreparedClaim> Prepare(const driver::ClaimWork& work, const driver::ClaimPlan& plan) override;
  Result<driver::ClaimEdits> Edits(const nlohmann::json& undo,
                                   const std::vector<std::string>& prepared_devices) override;
  Status Unprepare(const std::string& claim_uid, const nlohmann::json& undo) override;

  // Publishing port.
  std::vector<model::PublishedDevice> PublishedDevices() const override;
  bool MonitorsDeviceHealth() const override { return true; }
  bool OnHealthEvent(const devices::DeviceHealthEvent& event) override { return taints_.Apply(event); }
  // GPUs that owe a time-slice reset: reported unhealthy, retried every
  // reset_retry_period until the reset succeeds.
  std::unique_ptr<devices::DeviceHealthSource> NewOwnHealthSource() override;
  // One pass of that retry, now (tests).
  Status RetryOwedResetsForTest() { return resets_.RetryOwed(); }
  std::vector<std::string> MetricDeviceTypes() const override;

 private:
  GpuCheckpointCodec codec_;
  struct Located {
    const devices::GpuInfo* gpu = nullptr;
    const devices::MigDeviceInfo* mig = nullptr;  // null for a full GPU
  };
  const Located* Find(const std::string& device) const;
  Result<driver::ClaimEdits> EditsFor(const std::vector<std::string>& device_names) const;

  devices::NodeInventory inventory_;
  devices::DeviceEdits edits_;
  const GpuKindOptions options_;
  std::map<std::string, Located> by_name_;
  HealthTaints taints_;
  TimeSliceResets resets_;
};

}  // namespace nvdra::gpu
