// GPUs passed through to VMs (the PassthroughSupport gate), as upstream's
// vfio device type: every GPU without MIG devices is also published as
// gpu-vfio-<index> (its position among the node's GPUs by PCI bus id), with
// VfioDeviceConfig. The ledger holds the PCI device (PciResource) for it and
// for the plain gpu-<minor> alike, so that while one is prepared the other
// is refused.
//   Plan:  the PCI bus id and IOMMU group in the undo record, before
//          anything changes (so a crash after the unbind leaves a record
//          that binds the GPU back);
//   Apply: upstream's checks (IOMMU enabled; the GPU on nvidia or already
//          on vfio-pci; no SR-IOV VFs) and ours (every other device of the
//          IOMMU group unbound or on vfio-pci, else the group cannot be
//          used); the vfio_pci module loaded (modprobe chrooted into
//          --host-root when it is not); persistence mode off where
//          nvidia-persistenced runs; a wait until no process holds the
//          GPU's /dev/nvidia<minor> (refused, naming the processes, when
//          they outlast the wait); then the unbind from nvidia and the bind
//          to vfio-pci through driver_override. A GPU already on vfio-pci is
//          taken (a retry);
//   Undo:  the GPU bound back to nvidia, from the record alone, and its
//          persistence mode back on where Apply turned it off.
// Its containers get /dev/vfio/<group> (or, with PreferIommuFD where
// /dev/iommu exists, /dev/vfio/devices/vfio<N>), and in place of the
// claim-wide GPU edits NVIDIA_VISIBLE_DEVICES=void plus, with
// enableAPIDevice, /dev/vfio/vfio (or /dev/iommu).
// SweepOrphans binds back to nvidia the node's GPUs found on vfio-pci that
// no undo record names (a claim gone while its record was lost).
#pragma once

#include <chrono>
#include <functional>

#include "devices/gpu_control.h"
#include "devices/pci_driver_control.h"
#include "driver/claims_view.h"
#include "gpu/full_gpu_type.h"
#include "gpu/gpu_device_type.h"
#include "gpu/vfio_config.h"
#include "gpu/vfio_undo.h"

namespace nvdra::gpu {

inline constexpr const char* kVfioPciModule = "vfio_pci";

// What passthrough needs from the node beyond sysfs.
struct PassthroughHost {
  // --host-root: the host's root file system, where modprobe runs.
  std::string host_root = "/";
  // Where the host's processes are listed (<host-root>/proc where the host
  // root has one, else /proc).
  std::string proc_root = "/proc";
  // The driver root's /dev as this process sees it: a GPU is in use while a
  // process holds <dev_dir>/nvidia<minor>.
  std::string dev_dir = "/dev";
  // nvidia-persistenced runs while this exists
  // (<driver-root>/run/nvidia-persistenced/socket).
  std::string persistenced_socket;
  // How long Apply waits for the processes on a GPU to go, and how often
  // it looks. Below the kubelet's 45 s call timeout; its retry waits again.
  std::chrono::milliseconds gpu_free_timeout{30'000};
  std::chrono::milliseconds gpu_free_poll{1'000};
  // Loads a kernel module; empty: "chroot <host_root> modprobe <module>".
  std::function<Status(const std::string& module)> load_module;
};

// The ledger's name for a PCI device ("pci-0000:3b:00.0").
std::string PciResource(const std::string& pci_bus_id);

// The passthrough name of the GPU at `pci_bus_id` ("gpu-vfio-<i>"); empty
// when the inventory has no such GPU.
std::string VfioTwinName(const devices::NodeInventory& inventory, const std::string& pci_bus_id);

// Upstream's UUID of a passthrough device: the SHA-1 name-based UUID (v5)
// of the PCI bus id in the DNS namespace.
std::string VfioDeviceUuid(const std::string& pci_bus_id);

class VfioType final : public GpuDeviceType {
 public:
  // `pci` outlives the type; null in a type asked only for its name and
  // config. `iommufd_enabled`: /dev/iommu exists (the published attribute).
  // `control` (persistence mode) outlives the type too; null leaves
  // persistence mode alone.
  VfioType(devices::PciDriverControl* pci, bool iommufd_enabled, PassthroughHost host = {},
           devices::GpuControl* control = nullptr)
      : pci_(pci), iommufd_enabled_(iommufd_enabled), host_(std::move(host)), control_(control) {}

  std::string_view name() const override;
  std::string_view config_kind() const override { return "VfioDeviceConfig"; }
  std::optional<config::Config> DefaultConfig(const config::FeatureGates&) const override;
  std::vector<GpuDevice> Devices(const devices::NodeInventory& inventory) const override;
  model::PublishedDevice Publish(const GpuDevice& device) const override;
  std::vector<std::string> Held(const GpuDevice& device) const override;
  Result<cdi::ContainerEdits> Edits(const GpuDevice& device, const GpuContainerEdits& edits) const override;
  Result<cdi::ContainerEdits> Edits(const GpuDevice& device, const GpuUndo& undo,
                                    const GpuContainerEdits& edits) const override;

  Status Plan(const std::vector<const GpuDevice*>& devices, GpuUndo& undo) const override;
  Status Apply(GpuUndo& undo) override;
  Status Undo(const std::string& claim_uid, const GpuUndo& undo) override;

  using UndoRecords = std::function<Result<std::vector<GpuUndo>>()>;
  // Binds back to nvidia each GPU of `inventory` on vfio-pci that no record
  // of `undo_records()` (read after the sysfs listing) names. Returns how many.
  Result<int> SweepOrphans(const devices::NodeInventory& inventory, const UndoRecords& undo_records);

  // Adds to inventory.vfio_gpus the NVIDIA GPUs sysfs shows on vfio-pci, or
  // on no driver, that inventory.gpus lacks (NVML cannot see them). A GPU on
  // no driver is most likely one a passthrough Prepare unbound and was cut
  // short on: its claim's retry must find the device to finish the bind.
  // Either way such a GPU can only be passed through.
  static Status AddGpusOnVfio(devices::PciDriverControl& pci, devices::NodeInventory& inventory);

 private:
  Status ApplyOne(const VfioUndo& vfio);
  // Every other device of the GPU's IOMMU group on vfio-pci or on no driver.
  Status CheckIommuGroup(const VfioUndo& vfio, const devices::PciDeviceState& state);
  Status EnsureModule();
  Status AwaitGpuFree(const VfioUndo& vfio) const;
  Status CheckWired() const;
  devices::PciDriverControl* pci_;
  const bool iommufd_enabled_;
  const PassthroughHost host_;
  devices::GpuControl* control_;
};

// GpuKindOptions::device_prepared from the claims both plugin processes
// share (`claims` must outlive it): a claim holding the device, with it in
// its allocation, that is not being unprepared.
std::function<bool(const std::string& device)> DevicePreparedIn(const driver::ClaimsView& claims);

// Upstream's --host-root rule: it must exist when passthrough is on. Fills
// proc_root from it.
Result<PassthroughHost> PassthroughHostAt(const std::string& host_root, const std::string& container_driver_root);

// What passthrough changes about whole GPUs: a GPU that may be passed
// through is the twin of its vfio device, and a claim on it holds its PCI
// device too.
std::shared_ptr<const FullGpuDecoration> PassthroughGpuDecoration();

}  // namespace nvdra::gpu
