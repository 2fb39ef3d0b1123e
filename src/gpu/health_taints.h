// Device health as ResourceSlice taints, with upstream's keys, so the
// scheduler stops placing pods on a broken GPU: a critical XID taints the
// device `gpu.nvidia.com/xid=<xid>:NoSchedule`, a lost GPU
// `gpu.nvidia.com/gpu-lost:NoSchedule`, a device whose events cannot be
// watched `gpu.nvidia.com/unmonitored:None`, and an ignored XID
// `gpu.nvidia.com/xid=<xid>:None`. A device holds at most one taint per key,
// as upstream's. Unlike upstream, which overwrites the xid taint with the
// latest event, an ignored XID never replaces a critical one: XID 13 after
// XID 79 leaves the GPU tainted NoSchedule. Also unlike upstream, a device
// that reports healthy again loses its taints.
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
  std::vector<model::PublishedDevice> Decorate(std::vector<model::PublishedDevice> devices) const EXCLUDES(mu_);

 private:
  using TaintsByKey = std::map<std::string, model::DeviceTaint>;
  mutable Mutex mu_;
  std::map<std::string, TaintsByKey> taints_ GUARDED_BY(mu_);  // by device name
};

}  // namespace nvdra::gpu
