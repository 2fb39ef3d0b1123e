// The GPU device kind (driver gpu.nvidia.com): full GPUs and existing (static)
// MIG devices. Prepare applies the claim's sharing settings (time-slicing via
// GpuControl), builds the CDI edits of each device and records in the undo
// record what Unprepare must reset.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "cdi/cdi_spec_writer.h"
#include "devices/device_edits.h"
#include "devices/device_info.h"
#include "devices/gpu_control.h"
#include "driver/device_kind.h"
#include "gpu/health_taints.h"

namespace nvdra::gpu {

inline constexpr const char* kDriverName = "gpu.nvidia.com";

class GpuKind final : public driver::DeviceKind {
 public:
  GpuKind(devices::NodeInventory inventory, devices::DeviceEdits edits, devices::GpuControl& control,
          const cdi::CdiSpecWriter& cdi);

  std::string driver_name() const override { return kDriverName; }
  std::string DeviceType(const std::string& device) const override;
  std::vector<std::string> MetricDeviceTypes() const override;
  std::vector<model::PublishedDevice> PublishedDevices() const override;
  Result<driver::ClaimPlan> Plan(const driver::ClaimWork& work) override;
  Result<driver::PreparedClaim> Prepare(const driver::ClaimWork& work, const driver::ClaimPlan& plan,
                                        const nlohmann::json& previous_undo) override;
  Result<cdi::Spec> RebuildSpec(const ledger::ClaimEntry& entry) override;
  Status Unprepare(const ledger::ClaimEntry& entry) override;
  bool MonitorsDeviceHealth() const override { return true; }
  bool OnHealthEvent(const devices::DeviceHealthEvent& event) override { return taints_.Apply(event); }

 private:
  struct Located {
    const devices::GpuInfo* gpu = nullptr;
    const devices::MigDeviceInfo* mig = nullptr;  // null for a full GPU
  };
  const Located* Find(const std::string& device) const;
  Result<cdi::Spec> BuildSpec(const std::string& uid, const std::vector<std::string>& device_names) const;

  devices::NodeInventory inventory_;
  devices::DeviceEdits edits_;
  devices::GpuControl& control_;
  const cdi::CdiSpecWriter& cdi_;
  std::map<std::string, Located> by_name_;
  HealthTaints taints_;
};

}  // namespace nvdra::gpu
