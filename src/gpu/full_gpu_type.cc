#include "gpu/full_gpu_type.h"

#include "devices/device_names.h"
#include "gpu/gpu_device_types.h"
#include "gpu/gpu_published_devices.h"

namespace nvdra::gpu {

std::string_view FullGpuType::name() const { return kDeviceTypeGpu; }

std::vector<GpuDevice> FullGpuType::Devices(const devices::NodeInventory& inventory) const {
  std::vector<GpuDevice> out;
  for (const auto& g : inventory.gpus) {
    bool withheld = false;
    for (const auto& d : decorations_) withheld = withheld || d->Withholds(g);
    if (withheld) continue;
    GpuDevice device{devices::GpuDeviceName(g.minor), &g, this, false, g.uuid};
    for (const auto& d : decorations_) d->Decorate(inventory, device);
    out.push_back(std::move(device));
  }
  return out;
}

std::vector<std::string> FullGpuType::Held(const GpuDevice& device) const {
  std::vector<std::string> out = {device.name};
  for (const auto& d : decorations_) d->AddHeld(device, out);
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
  for (const auto& decoration : decorations_) decoration->Decorate(device, d);
  return d;
}

}  // namespace nvdra::gpu
