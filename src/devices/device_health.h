// Device health: events that say a published device became unhealthy (a
// critical XID, a lost GPU), could not be monitored, or saw an event that
// leaves its health as it was (an ignored XID). Sources are the NVML
// event set (XidWatcher) and, for the mock backend, a file of injected
// events. Consumers turn events into the health stream and slice taints.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "devices/device_info.h"
#include "util/status.h"

namespace nvdra::devices {

// kNotice is an event that says nothing about the device's health (an XID
// on the ignore list): it is shown, but a device that was unhealthy stays so.
// Only kHealthy says a device is fit again.
enum class HealthState { kHealthy, kUnhealthy, kUnmonitored, kNotice };
const char* HealthStateName(HealthState s);

struct DeviceHealthEvent {
  std::string device;  // published device name, e.g. "gpu-0" (no pool)
  HealthState state = HealthState::kHealthy;
  std::optional<uint64_t> xid;
  std::string message;  // "XID 79 (critical)", "GPU lost", ...
  friend bool operator==(const DeviceHealthEvent&, const DeviceHealthEvent&) = default;
};

using HealthCallback = std::function<void(const DeviceHealthEvent&)>;

// Which XIDs mark a device unhealthy: all but the upstream ignore list
// (13, 31, 43, 45, 68, 109: application-caused) and any extra ones.
class XidPolicy {
 public:
  XidPolicy();
  // Parses "--additional-xids-to-ignore" ("74,79"); InvalidArgument names
  // the bad entry (upstream silently skips it; we refuse to start).
  static Result<XidPolicy> WithAdditional(const std::string& comma_list);
  bool IsCritical(uint64_t xid) const { return ignored_.count(xid) == 0; }
  const std::set<uint64_t>& ignored() const { return ignored_; }

 private:
  std::set<uint64_t> ignored_;
};

// The devices an event on a GPU affects: the full GPU when MIG is off; for a
// MIG-enabled GPU the MIG device (gi, ci) or, for a GPU-wide event (no gi),
// every MIG device of it.
std::vector<std::string> AffectedDevices(const GpuInfo& gpu, std::optional<int> gi, std::optional<int> ci);

class DeviceHealthSource {
 public:
  virtual ~DeviceHealthSource() = default;
  // Starts watching `inventory`'s devices in a background thread; events go
  // to `callback` from that thread.
  virtual Status Start(const NodeInventory& inventory, HealthCallback callback) = 0;
  // Stops the thread; idempotent.
  virtual void Stop() = 0;
};

}  // namespace nvdra::devices
