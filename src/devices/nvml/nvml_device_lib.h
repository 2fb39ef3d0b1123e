// The NVML backend: GPUs, static MIG devices, the MIG profiles and
// placements dynamic MIG creates from, and the NVLink clique from
// libnvidia-ml.so.1 (dlopen from the container driver root); MIG devices
// created and destroyed through NVML (nvml_gpu_control.h); and XID event
// watching for health.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <thread>

#include "devices/device_lib.h"
#include "devices/nvml/nvml_library.h"
#include "util/mutex.h"

namespace nvdra::devices {

// Names as the upstream driver publishes them.
std::string NvmlBrandName(int brand);
std::string NvmlArchitectureName(unsigned arch);
// "00000000:3B:00.0" -> "0000:3b:00.0".
std::string NormalizePciBusId(const std::string& nvml_bus_id);
// 16 bytes -> "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
std::string FormatUuidBytes(const unsigned char bytes[16]);

class NvmlDeviceLib final : public DeviceLib {
 public:
  static Result<std::unique_ptr<NvmlDeviceLib>> Open(const DeviceLibOptions& options);

  Result<NodeInventory> Discover() override EXCLUDES(mu_);
  GpuControl& control() override { return *control_; }
  PciDriverControl& pci() override { return *pci_; }
  // libnvfm.so from the driver root, where the node has an NVSwitch fabric
  // (nvfm_fabric_manager.h).
  Result<std::unique_ptr<FabricManager>> OpenFabricManager() override;
  std::unique_ptr<DeviceHealthSource> NewHealthSource() override;
  const DriverRoot& driver_root() const override { return root_; }
  std::string proc_devices_path() const override { return proc_devices_; }
  std::string capabilities_dir() const override;
  std::string backend_name() const override { return "nvml"; }
  std::string driver_version_file() const override { return options_.driver_version_file; }
  const NvmlLibrary& library() const { return *lib_; }
  // NVML unloaded while the driver is gone, loaded again from the driver
  // root once it is back (NvmlLibrary::Unload, Reload).
  void ReleaseDriver() override EXCLUDES(mu_);
  Status AcquireDriver() override EXCLUDES(mu_);

 private:
  NvmlDeviceLib(DriverRoot root, std::unique_ptr<NvmlLibrary> lib, DeviceLibOptions options);
  Result<GpuInfo> DiscoverGpu(nvmlDevice_t dev, const std::string& driver_version, const std::string& cuda_version);
  Status DiscoverMigProfiles(nvmlDevice_t dev, GpuInfo& gpu);
  Status DiscoverMigs(nvmlDevice_t dev, GpuInfo& gpu);
  Status DiscoverFabric(nvmlDevice_t dev, GpuInfo& gpu);

  DriverRoot root_;
  std::unique_ptr<NvmlLibrary> lib_;
  DeviceLibOptions options_;
  std::string proc_devices_;
  XidPolicy xids_;
  std::unique_ptr<GpuControl> control_;
  std::unique_ptr<PciDriverControl> pci_;
  Mutex mu_;  // NVML enumeration is not re-entrant across our callers: Discover holds it
};

// Watches NVML events: critical XIDs make devices unhealthy, a lost GPU makes
// all of them unhealthy, and GPUs whose events cannot be registered are
// reported unmonitored.
class XidWatcher final : public DeviceHealthSource {
 public:
  XidWatcher(const NvmlLibrary* lib, XidPolicy policy);
  ~XidWatcher() override;
  Status Start(const NodeInventory& inventory, HealthCallback callback) override;
  void Stop() override;

  // The pieces Start uses, callable by tests without a thread: Register sets
  // up the event set; PollOnce waits up to `timeout_ms` for one event.
  Status Register(const NodeInventory& inventory, HealthCallback callback);
  // Returns false when the event set is unusable (stop watching).
  bool PollOnce(unsigned timeout_ms);

 private:
  void Emit(const GpuInfo& gpu, std::optional<int> gi, std::optional<int> ci, HealthState state,
            std::optional<uint64_t> xid, const std::string& message);
  const NvmlLibrary* lib_;
  XidPolicy policy_;
  std::optional<NvmlLibrary::Session> session_;
  nvmlEventSet_t set_ = nullptr;
  NodeInventory inventory_;
  std::map<nvmlDevice_t, size_t> gpu_by_handle_;
  HealthCallback callback_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace nvdra::devices
