#include "gpu/health_taints.h"

#include <optional>

namespace nvdra::gpu {

namespace {

constexpr const char* kXidKey = "gpu.nvidia.com/xid";
constexpr const char* kNoSchedule = "NoSchedule";

// The taint an event asks for; none for a recovery or an event without one.
std::optional<model::DeviceTaint> WantedTaint(const devices::DeviceHealthEvent& event) {
  switch (event.state) {
    case devices::HealthState::kHealthy: return std::nullopt;
    case devices::HealthState::kUnhealthy:
      if (event.xid) return model::DeviceTaint{kXidKey, std::to_string(*event.xid), kNoSchedule};
      return model::DeviceTaint{"gpu.nvidia.com/gpu-lost", "", kNoSchedule};
    case devices::HealthState::kUnmonitored: return model::DeviceTaint{"gpu.nvidia.com/unmonitored", "", "None"};
    case devices::HealthState::kNotice:
      if (event.xid) return model::DeviceTaint{kXidKey, std::to_string(*event.xid), "None"};
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

bool HealthTaints::Apply(const devices::DeviceHealthEvent& event) {
  MutexLock l(mu_);
  if (event.state == devices::HealthState::kHealthy) return taints_.erase(event.device) > 0;
  std::optional<model::DeviceTaint> want = WantedTaint(event);
  if (!want) return false;
  TaintsByKey& taints = taints_[event.device];
  auto it = taints.find(want->key);
  if (it != taints.end()) {
    // An ignored XID is news only where no critical one is standing.
    if (event.state == devices::HealthState::kNotice && it->second.effect == kNoSchedule) return false;
    if (it->second == *want) return false;
  }
  taints[want->key] = *want;
  return true;
}

std::vector<model::PublishedDevice> HealthTaints::Decorate(std::vector<model::PublishedDevice> devices) const {
  MutexLock l(mu_);
  for (auto& d : devices) {
    auto it = taints_.find(d.name);
    if (it == taints_.end()) continue;
    for (const auto& [key, taint] : it->second) d.taints.push_back(taint);
  }
  return devices;
}

}  // namespace nvdra::gpu
