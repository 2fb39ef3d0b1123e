#include "driver/reloadable_kind.h"

namespace nvdra::driver {

ReloadableKind::ReloadableKind(std::unique_ptr<DeviceKind> kind, const ledger::KindCodec& codec)
    : codec_(codec), kind_(std::move(kind)) {}

void ReloadableKind::SetGone(std::string why) {
  MutexLock l(mu_);
  gone_ = why.empty() ? std::string("the driver is reloading") : std::move(why);
}

bool ReloadableKind::gone() const {
  MutexLock l(mu_);
  return !gone_.empty();
}

std::shared_ptr<DeviceKind> ReloadableKind::Replace(std::unique_ptr<DeviceKind> kind) {
  std::shared_ptr<DeviceKind> next(std::move(kind));
  MutexLock l(mu_);
  if (republish_) next->SetRepublish(republish_);
  kind_.swap(next);
  gone_.clear();
  return next;
}

std::shared_ptr<DeviceKind> ReloadableKind::Current() const {
  MutexLock l(mu_);
  return kind_;
}

Status ReloadableKind::Refused() const {
  MutexLock l(mu_);
  if (gone_.empty()) return Status::Ok();
  return Unavailable(gone_);
}

std::string ReloadableKind::driver_name() const { return Current()->driver_name(); }
std::string ReloadableKind::DeviceType(const std::string& device) const { return Current()->DeviceType(device); }
config::DriverConfigRules ReloadableKind::ConfigRules(const config::FeatureGates& gates) const {
  return Current()->ConfigRules(gates);
}
Result<ClaimPlan> ReloadableKind::Plan(const ClaimWork& work) {
  NVDRA_RETURN_IF_ERROR(Refused());
  return Current()->Plan(work);
}
Status ReloadableKind::CheckReady(const ClaimWork& work, const ClaimPlan& plan) {
  NVDRA_RETURN_IF_ERROR(Refused());
  return Current()->CheckReady(work, plan);
}
bool ReloadableKind::MayWaitUntilReady(const ClaimWork& work, const ClaimPlan& plan) const {
  return Current()->MayWaitUntilReady(work, plan);
}
Result<PreparedClaim> ReloadableKind::Prepare(const ClaimWork& work, const ClaimPlan& plan) {
  NVDRA_RETURN_IF_ERROR(Refused());
  return Current()->Prepare(work, plan);
}
Status ReloadableKind::AwaitReady(const ClaimWork& work, const nlohmann::json& undo) {
  return Current()->AwaitReady(work, undo);
}
// The edits name the driver's files: none while it is gone.
Result<ClaimEdits> ReloadableKind::Edits(const nlohmann::json& undo, const std::vector<std::string>& prepared_devices) {
  NVDRA_RETURN_IF_ERROR(Refused());
  return Current()->Edits(undo, prepared_devices);
}
// From the record alone, on whichever kind is there: never refused.
Status ReloadableKind::Unprepare(const std::string& claim_uid, const nlohmann::json& undo) {
  return Current()->Unprepare(claim_uid, undo);
}
bool ReloadableKind::HasDeviceMetadata() const { return Current()->HasDeviceMetadata(); }
std::map<std::string, model::AttributeValue> ReloadableKind::MetadataAttributes(const std::string& device) const {
  return Current()->MetadataAttributes(device);
}

std::vector<model::PublishedDevice> ReloadableKind::PublishedDevices() const {
  std::vector<model::PublishedDevice> devices;
  devices = Current()->PublishedDevices();
  if (!gone()) return devices;
  const std::string key = taint_key();
  for (auto& d : devices) d.taints.push_back({key, "true", "NoSchedule"});
  return devices;
}
bool ReloadableKind::MonitorsDeviceHealth() const { return Current()->MonitorsDeviceHealth(); }
bool ReloadableKind::OnHealthEvent(const devices::DeviceHealthEvent& event) { return Current()->OnHealthEvent(event); }
std::unique_ptr<devices::DeviceHealthSource> ReloadableKind::NewOwnHealthSource() {
  return Current()->NewOwnHealthSource();
}
std::vector<std::string> ReloadableKind::MetricDeviceTypes() const { return Current()->MetricDeviceTypes(); }
void ReloadableKind::SetRepublish(std::function<void()> republish) {
  {
    MutexLock l(mu_);
    republish_ = republish;
  }
  Current()->SetRepublish(std::move(republish));
}

}  // namespace nvdra::driver
