#include "gpu/static_mig_type.h"

#include "devices/device_names.h"
#include "gpu/gpu_device_types.h"
#include "gpu/gpu_published_devices.h"

namespace nvdra::gpu {

std::string_view StaticMigType::name() const { return kDeviceTypeMig; }

std::vector<GpuDevice> StaticMigType::Devices(const devices::NodeInventory& inventory) const {
  std::vector<GpuDevice> out;
  for (const auto& g : inventory.gpus) {
    if (!g.mig_enabled) continue;
    for (const auto& m : g.migs) {
      out.push_back({devices::MigDeviceName(m), &g, this, true, m.uuid, std::make_shared<const StaticMigDevice>(m)});
    }
  }
  return out;
}

model::PublishedDevice StaticMigType::Publish(const GpuDevice& device) const {
  const devices::GpuInfo& g = *device.gpu;
  const devices::MigDeviceInfo& m = DetailOf<StaticMigDevice>(device).mig;
  model::PublishedDevice d;
  d.name = device.name;
  d.attributes["type"] = std::string(name());
  d.attributes["uuid"] = m.uuid;
  d.attributes["parentUUID"] = g.uuid;
  d.attributes["profile"] = m.profile;
  PutCommonGpuAttributes(d, g);
  d.capacity["multiprocessors"] = std::to_string(m.multiprocessors);
  d.capacity["copyEngines"] = std::to_string(m.copy_engines);
  d.capacity["decoders"] = std::to_string(m.decoders);
  d.capacity["encoders"] = std::to_string(m.encoders);
  d.capacity["jpegEngines"] = std::to_string(m.jpeg_engines);
  d.capacity["ofaEngines"] = std::to_string(m.ofa_engines);
  d.capacity["memory"] = std::to_string(m.memory_bytes);
  for (int i = m.placement_start; i < m.placement_start + m.placement_size; ++i) {
    d.capacity["memorySlice" + std::to_string(i)] = "1";
  }
  return d;
}

namespace {

class StaticMigDecoration final : public FullGpuDecoration {
 public:
  bool Withholds(const devices::GpuInfo& gpu) const override { return gpu.mig_enabled; }
};

}  // namespace

std::shared_ptr<const FullGpuDecoration> StaticMigGpuDecoration() { return std::make_shared<StaticMigDecoration>(); }

}  // namespace nvdra::gpu
