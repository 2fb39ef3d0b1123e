// Device health as ResourceSlice taints, with upstream's keys, so the
// scheduler stops placing pods on a broken GPU: a critical XID taints the
// device `gpu.nvidia.com/xid=<xid>:NoSchedule`, a lost GPU
// `gpu.nvidia.com/gpu-lost:NoSchedule`, a device whose events cannot be
// watched `gpu.nvidia.com/unmonitored:None`. Unlike upstream, a device that
// reports healthy again loses its taint.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "devices/device_health.h"
#include "model/published_device.h"
#include "util/mutex.h"

namespace nvdra::gpu {

class HealthTaints {
 public:
  // Records an event; returns true when the device's taints changed.
  bool Apply(const devices::DeviceHealthEvent& event) EXCLUDES(mu_);

  // `devices` with the current taints attached (others' taints untouched).
  std::vector<model::PublishedDevice> Decorate(std::vector<model::PublishedDevice> devices) const
      EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  std::map<std::string, model::DeviceTaint> taints_ GUARDED_BY(mu_);  // by device name
};

}  // namespace nvdra::gpu
