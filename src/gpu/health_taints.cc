#include "gpu/health_taints.h"

namespace nvdra::gpu {

bool HealthTaints::Apply(const devices::DeviceHealthEvent& event) {
  MutexLock l(mu_);
  std::optional<model::DeviceTaint> want;
  switch (event.state) {
    case devices::HealthState::kHealthy:
      break;
    case devices::HealthState::kUnhealthy:
      if (event.xid) {
        want = model::DeviceTaint{"gpu.nvidia.com/xid", std::to_string(*event.xid), "NoSchedule"};
      } else {
        want = model::DeviceTaint{"gpu.nvidia.com/gpu-lost", "", "NoSchedule"};
      }
      break;
    case devices::HealthState::kUnmonitored:
      want = model::DeviceTaint{"gpu.nvidia.com/unmonitored", "", "None"};
      break;
  }
  auto it = taints_.find(event.device);
  if (!want) {
    if (it == taints_.end()) return false;
    taints_.erase(it);
    return true;
  }
  if (it != taints_.end() && it->second == *want) return false;
  taints_[event.device] = *want;
  return true;
}

std::vector<model::PublishedDevice> HealthTaints::Decorate(std::vector<model::PublishedDevice> devices) const {
  MutexLock l(mu_);
  for (auto& d : devices) {
    auto it = taints_.find(d.name);
    if (it != taints_.end()) d.taints.push_back(it->second);
  }
  return devices;
}

}  // namespace nvdra::gpu
