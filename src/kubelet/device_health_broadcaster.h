// Device health as the kubelet's DRAResourceHealth stream reports it. The
// device layer (NVML events, a mock profile) feeds a DeviceHealthBroadcaster;
// every NodeWatchResources stream gets the complete state when it connects
// and again after each change (the kubelet reconciles full lists).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "util/clock.h"
#include "util/mutex.h"

namespace nvdra::kubelet {

enum class DeviceHealthStatus { kUnknown = 0, kHealthy = 1, kUnhealthy = 2 };

const char* DeviceHealthStatusName(DeviceHealthStatus s);  // "HEALTHY", ...

struct DeviceHealth {
  std::string pool;
  std::string device;
  DeviceHealthStatus health = DeviceHealthStatus::kUnknown;
  int64_t last_updated_unix = 0;             // 0: stamped with the broadcaster's clock
  int64_t health_check_timeout_seconds = 0;  // 0: the kubelet's default
  std::string message;

  friend bool operator==(const DeviceHealth&, const DeviceHealth&) = default;
};

struct DeviceHealthSnapshot {
  uint64_t version = 0;
  std::vector<DeviceHealth> devices;  // sorted by (pool, device)
};

// What the health stream reads. Implementations must be safe to call from
// many streams at once.
class DeviceHealthSource {
 public:
  virtual ~DeviceHealthSource() = default;
  // The current state once its version differs from `seen_version`; nullopt
  // when `deadline` passes first or the source is closed (see Closed()).
  virtual std::optional<DeviceHealthSnapshot> WaitForChange(uint64_t seen_version,
                                                            std::chrono::steady_clock::time_point deadline) = 0;
  virtual bool Closed() const = 0;
  // Makes every wait in progress return nullopt now, so that a stream can
  // see its server stopping without polling.
  virtual void WakeWaiters() = 0;
};

class DeviceHealthBroadcaster final : public DeviceHealthSource {
 public:
  explicit DeviceHealthBroadcaster(const Clock& clock = SystemClock::Get()) : clock_(clock) {}

  // Adds or replaces the given devices; others keep their state.
  void Update(std::vector<DeviceHealth> devices) EXCLUDES(mu_);
  // Replaces the whole state (devices not listed are dropped).
  void Replace(std::vector<DeviceHealth> devices) EXCLUDES(mu_);
  // Wakes every stream; they end cleanly.
  void Close() EXCLUDES(mu_);

  DeviceHealthSnapshot Current() const EXCLUDES(mu_);
  std::optional<DeviceHealthSnapshot> WaitForChange(uint64_t seen_version,
                                                    std::chrono::steady_clock::time_point deadline) override
      EXCLUDES(mu_);
  bool Closed() const override EXCLUDES(mu_);
  void WakeWaiters() override EXCLUDES(mu_);

 private:
  void PutLocked(DeviceHealth d) REQUIRES(mu_);
  DeviceHealthSnapshot SnapshotLocked() const REQUIRES(mu_);

  const Clock& clock_;
  mutable Mutex mu_;
  CondVar changed_;
  // Streams start from 0, so they get the state at once.
  uint64_t version_ GUARDED_BY(mu_) = 1;
  bool closed_ GUARDED_BY(mu_) = false;
  uint64_t wakes_ GUARDED_BY(mu_) = 0;  // WakeWaiters calls
  std::map<std::pair<std::string, std::string>, DeviceHealth> devices_ GUARDED_BY(mu_);
};

}  // namespace nvdra::kubelet
