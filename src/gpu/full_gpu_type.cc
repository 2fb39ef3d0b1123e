#include "gpu/full_gpu_type.h"

#include "devices/device_names.h"
#include "gpu/gpu_device_types.h"
#include "gpu/gpu_published_devices.h"
#include "gpu/mig_counters.h"
#include "gpu/vfio_type.h"

namespace nvdra::gpu {

std::string_view FullGpuType::name() const { return kDeviceTypeGpu; }

bool FullGpuType::Partitioned(const devices::GpuInfo& gpu) const {
  return partitionable_ && devices::DynamicMigCapable(gpu);
}

std::vector<GpuDevice> FullGpuType::Devices(const devices::NodeInventory& inventory) const {
  std::vector<GpuDevice> out;
  for (const auto& g : inventory.gpus) {
    bool published = !g.mig_enabled || (Partitioned(g) && devices::SupportsMigModeToggle(g));
    if (!published) continue;
    GpuDevice d{devices::GpuDeviceName(g.minor), &g, nullptr, this};
    if (passthrough_ && !g.mig_enabled && g.migs.empty()) d.twin = VfioTwinName(inventory, g.pci_bus_id);
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<std::string> FullGpuType::Held(const GpuDevice& device) const {
  std::vector<std::string> out = {device.name};
  if (passthrough_ && !device.gpu->pci_bus_id.empty()) out.push_back(PciResource(device.gpu->pci_bus_id));
  if (!device.twin.empty()) out.push_back(device.twin);
  if (!Partitioned(*device.gpu)) return out;
  for (int i = 0; i < devices::MemorySliceCount(*device.gpu); ++i) {
    out.push_back(MemorySliceResource(device.gpu->minor, i));
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
  if (!Partitioned(g)) {
    if (g.memory_bytes) d.capacity["memory"] = std::to_string(*g.memory_bytes);
    return d;
  }
  d.capacity = MaxMigCapacities(g);
  d.counter_sets.push_back(GpuCounterSet(g));
  d.consumes_counters.push_back(Consumption(g, d.capacity, 0, devices::MemorySliceCount(g)));
  return d;
}

}  // namespace nvdra::gpu
