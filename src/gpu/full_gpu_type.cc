#include "gpu/full_gpu_type.h"

#include "devices/device_names.h"
#include "gpu/gpu_device_types.h"
#include "gpu/gpu_published_devices.h"

namespace nvdra::gpu {

std::string_view FullGpuType::name() const { return kDeviceTypeGpu; }

std::vector<GpuDevice> FullGpuType::Devices(const devices::NodeInventory& inventory) const {
  std::vector<GpuDevice> out;
  for (const auto& g : inventory.gpus) {
    if (!g.mig_enabled) out.push_back({devices::GpuDeviceName(g.minor), &g, nullptr, this});
  }
  return out;
}

model::PublishedDevice FullGpuType::Publish(const GpuDevice& device) const {
  const devices::GpuInfo& g = *device.gpu;
  model::PublishedDevice d;
  d.name = device.name;
  d.attributes["type"] = std::string(name());
  d.attributes["uuid"] = g.uuid;
  PutCommonGpuAttributes(d, g);
  if (g.memory_bytes) d.capacity["memory"] = std::to_string(*g.memory_bytes);
  return d;
}

}  // namespace nvdra::gpu
