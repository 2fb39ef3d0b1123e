// A device kind that can be rebuilt while the plugin runs: the plugin's
// engine, publisher and health code hold this one, and it hands each call to
// the kind it holds now. When the hardware's driver goes away (an upgrade of
// the NVIDIA driver), new claims are refused with a retryable error that
// says so, while an Unprepare still runs from the ledger's undo record on
// the kind that prepared it; the devices are published with a NoSchedule
// taint so the scheduler stops placing pods on them. When the driver is
// back, the plugin builds a kind on the new driver and swaps it in.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "driver/device_kind.h"
#include "util/mutex.h"

namespace nvdra::driver {

class ReloadableKind final : public DeviceKind {
 public:
  // `codec`: the plugin's (the same for every kind it builds), outlives this.
  ReloadableKind(std::unique_ptr<DeviceKind> kind, const ledger::KindCodec& codec);

  // The driver went away: `why` is the message of each refused claim.
  void SetGone(std::string why);
  // The driver is back and `kind` was built on it: swaps it in and returns
  // the old one, which calls in flight keep alive until they return (the
  // last of them destroys it). New claims are accepted again.
  std::shared_ptr<DeviceKind> Replace(std::unique_ptr<DeviceKind> kind);
  bool gone() const;
  // The taint on every device while the driver is gone.
  std::string taint_key() const { return driver_name() + "/driver-reloading"; }

  // Engine port.
  std::string driver_name() const override;
  std::string DeviceType(const std::string& device) const override;
  config::DriverConfigRules ConfigRules(const config::FeatureGates& gates) const override;
  Result<ClaimPlan> Plan(const ClaimWork& work) override;
  Status CheckReady(const ClaimWork& work, const ClaimPlan& plan) override;
  bool MayWaitUntilReady(const ClaimWork& work, const ClaimPlan& plan) const override;
  Result<PreparedClaim> Prepare(const ClaimWork& work, const ClaimPlan& plan) override;
  Status AwaitReady(const ClaimWork& work, const nlohmann::json& undo) override;
  Result<ClaimEdits> Edits(const nlohmann::json& undo, const std::vector<std::string>& prepared_devices) override;
  const ledger::KindCodec& codec() const override { return codec_; }
  Status Unprepare(const std::string& claim_uid, const nlohmann::json& undo) override;
  bool HasDeviceMetadata() const override;
  std::map<std::string, model::AttributeValue> MetadataAttributes(const std::string& device) const override;

  // Publishing port.
  std::vector<model::PublishedDevice> PublishedDevices() const override;
  bool MonitorsDeviceHealth() const override;
  bool OnHealthEvent(const devices::DeviceHealthEvent& event) override;
  std::unique_ptr<devices::DeviceHealthSource> NewOwnHealthSource() override;
  std::vector<std::string> MetricDeviceTypes() const override;
  void SetRepublish(std::function<void()> republish) override;

 private:
  Status Refused() const;
  // Each call holds the kind it started on, so a swap never waits for one
  // and a call never holds a lock while the kind runs.
  std::shared_ptr<DeviceKind> Current() const;
  const ledger::KindCodec& codec_;
  mutable Mutex mu_;
  std::shared_ptr<DeviceKind> kind_ GUARDED_BY(mu_);
  std::string gone_ GUARDED_BY(mu_);  // "" while the driver is there
  std::function<void()> republish_ GUARDED_BY(mu_);
};

}  // namespace nvdra::driver
