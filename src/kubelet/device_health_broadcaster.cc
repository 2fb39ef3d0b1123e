#include "kubelet/device_health_broadcaster.h"

namespace nvdra::kubelet {

const char* DeviceHealthStatusName(DeviceHealthStatus s) {
  switch (s) {
    case DeviceHealthStatus::kHealthy: return "HEALTHY";
    case DeviceHealthStatus::kUnhealthy: return "UNHEALTHY";
    case DeviceHealthStatus::kUnknown: break;
  }
  return "UNKNOWN";
}

void DeviceHealthBroadcaster::PutLocked(DeviceHealth d) {
  if (d.last_updated_unix == 0) {
    d.last_updated_unix = std::chrono::duration_cast<std::chrono::seconds>(clock_.Now().time_since_epoch()).count();
  }
  auto key = std::make_pair(d.pool, d.device);
  devices_[key] = std::move(d);
}

void DeviceHealthBroadcaster::Update(std::vector<DeviceHealth> devices) {
  {
    MutexLock lock(mu_);
    for (auto& d : devices) PutLocked(std::move(d));
    ++version_;
  }
  changed_.NotifyAll();
}

void DeviceHealthBroadcaster::Replace(std::vector<DeviceHealth> devices) {
  {
    MutexLock lock(mu_);
    devices_.clear();
    for (auto& d : devices) PutLocked(std::move(d));
    ++version_;
  }
  changed_.NotifyAll();
}

void DeviceHealthBroadcaster::Close() {
  {
    MutexLock lock(mu_);
    closed_ = true;
  }
  changed_.NotifyAll();
}

bool DeviceHealthBroadcaster::Closed() const {
  MutexLock lock(mu_);
  return closed_;
}

DeviceHealthSnapshot DeviceHealthBroadcaster::SnapshotLocked() const {
  DeviceHealthSnapshot s;
  s.version = version_;
  s.devices.reserve(devices_.size());
  for (const auto& [key, d] : devices_) s.devices.push_back(d);
  return s;
}

DeviceHealthSnapshot DeviceHealthBroadcaster::Current() const {
  MutexLock lock(mu_);
  return SnapshotLocked();
}

std::optional<DeviceHealthSnapshot> DeviceHealthBroadcaster::WaitForChange(
    uint64_t seen_version, std::chrono::steady_clock::time_point deadline) {
  MutexLock lock(mu_);
  const uint64_t wakes = wakes_;
  changed_.WaitUntil(mu_, deadline,
                     [&]() REQUIRES(mu_) { return closed_ || version_ != seen_version || wakes_ != wakes; });
  if (closed_ || version_ == seen_version) return std::nullopt;
  return SnapshotLocked();
}

void DeviceHealthBroadcaster::WakeWaiters() {
  {
    MutexLock lock(mu_);
    ++wakes_;
  }
  changed_.NotifyAll();
}

}  // namespace nvdra::kubelet
