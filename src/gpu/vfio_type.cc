#include "gpu/vfio_type.h"

#include <openssl/evp.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <set>
#include <thread>

#include "devices/device_names.h"
#include "devices/nvidia_smi_control.h"
#include "devices/open_files.h"
#include "util/file_util.h"

#include "gpu/gpu_device_types.h"
#include "gpu/gpu_published_devices.h"
#include "gpu/vfio_edits.h"
#include "util/failpoint.h"
#include "util/log.h"

namespace nvdra::gpu {

namespace {

// Positions among the node's GPUs by PCI bus id, as upstream numbers them
// (GPUs on vfio-pci included).
std::vector<const devices::GpuInfo*> ByBusId(const devices::NodeInventory& inventory) {
  std::vector<const devices::GpuInfo*> out;
  for (const auto& g : inventory.gpus) out.push_back(&g);
  for (const auto& g : inventory.vfio_gpus) out.push_back(&g);
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->pci_bus_id < b->pci_bus_id; });
  return out;
}

const VfioUndo* FindItem(const GpuUndo& undo, const std::string& device) {
  for (const auto& v : undo.Of<PassthroughUndo>().gpus) {
    if (v.device == device) return &v;
  }
  return nullptr;
}

}  // namespace

std::string PciResource(const std::string& pci_bus_id) { return "pci-" + pci_bus_id; }

std::string VfioDeviceUuid(const std::string& pci_bus_id) {
  // 6ba7b810-9dad-11d1-80b4-00c04fd430c8, the DNS namespace.
  static constexpr unsigned char kDns[16] = {0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad, 0x11, 0xd1,
                                             0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8};
  std::string input(reinterpret_cast<const char*>(kDns), sizeof(kDns));
  input += pci_bus_id;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(input.data(), input.size(), digest, &len, EVP_sha1(), nullptr);
  digest[6] = static_cast<unsigned char>((digest[6] & 0x0f) | 0x50);
  digest[8] = static_cast<unsigned char>((digest[8] & 0x3f) | 0x80);
  char out[37];
  std::snprintf(out, sizeof(out), "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", digest[0],
                digest[1], digest[2], digest[3], digest[4], digest[5], digest[6], digest[7], digest[8], digest[9],
                digest[10], digest[11], digest[12], digest[13], digest[14], digest[15]);
  return out;
}

std::string_view VfioType::name() const { return kDeviceTypeVfio; }

std::optional<config::Config> VfioType::DefaultConfig(const config::FeatureGates&) const {
  VfioDeviceConfig c;
  c.iommu = IommuConfig{std::string(kIommuLegacyOnly), false};
  return c;
}

std::vector<GpuDevice> VfioType::Devices(const devices::NodeInventory& inventory) const {
  std::vector<GpuDevice> out;
  int index = 0;
  for (const devices::GpuInfo* g : ByBusId(inventory)) {
    const int i = index++;
    // As upstream: only a GPU without MIG devices may be passed through.
    if (g->mig_enabled || !g->migs.empty() || g->pci_bus_id.empty()) continue;
    GpuDevice d{"gpu-vfio-" + std::to_string(i), g, this, false, g->uuid};
    if (!g->uuid.empty()) d.twin = devices::GpuDeviceName(g->minor);
    out.push_back(std::move(d));
  }
  return out;
}

model::PublishedDevice VfioType::Publish(const GpuDevice& device) const {
  const devices::GpuInfo& g = *device.gpu;
  model::PublishedDevice d;
  d.name = device.name;
  d.attributes["type"] = std::string(name());
  d.attributes["uuid"] = VfioDeviceUuid(g.pci_bus_id);
  // A GPU found on vfio-pci at start has no name from NVML.
  if (!g.product_name.empty()) d.attributes["productName"] = g.product_name;
  d.attributes["iommuFDEnabled"] = iommufd_enabled_;
  d.attributes["resource.kubernetes.io/pciBusID"] = g.pci_bus_id;
  if (g.pcie_root) d.attributes["resource.kubernetes.io/pcieRoot"] = *g.pcie_root;
  if (g.numa_node) d.attributes[std::string(kNumaNodeAttribute)] = static_cast<int64_t>(*g.numa_node);
  std::string vendor = "0x10de", device_id;
  uint64_t memory = 0;
  if (pci_ != nullptr) {
    if (auto s = pci_->Read(g.pci_bus_id); s.ok()) {
      if (!s->vendor_id.empty()) vendor = s->vendor_id;
      device_id = s->device_id;
      memory = s->addressable_memory_bytes;
    }
  }
  d.attributes["vendorID"] = vendor;
  d.attributes["deviceID"] = device_id;
  d.capacity["addressableMemory"] = std::to_string(memory);
  return d;
}

std::vector<std::string> VfioType::Held(const GpuDevice& device) const {
  std::vector<std::string> out = {device.name, PciResource(device.gpu->pci_bus_id)};
  if (!device.twin.empty()) out.push_back(device.twin);
  return out;
}

std::string VfioTwinName(const devices::NodeInventory& inventory, const std::string& pci_bus_id) {
  std::vector<const devices::GpuInfo*> all = ByBusId(inventory);
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i]->pci_bus_id == pci_bus_id) return "gpu-vfio-" + std::to_string(i);
  }
  return "";
}

Status VfioType::CheckWired() const {
  if (pci_ == nullptr) return Internal("passthrough devices have no PCI driver control on this plugin");
  return Status::Ok();
}

Result<cdi::ContainerEdits> VfioType::Edits(const GpuDevice& device, const GpuContainerEdits& edits) const {
  NVDRA_RETURN_IF_ERROR(CheckWired());
  NVDRA_ASSIGN_OR_RETURN(devices::PciDeviceState s, pci_->Read(device.gpu->pci_bus_id));
  if (!s.iommu_group) return FailedPrecondition("GPU " + device.gpu->pci_bus_id + " has no IOMMU group");
  return VfioEdits(edits, *s.iommu_group, false, "");
}

Result<cdi::ContainerEdits> VfioType::Edits(const GpuDevice& device, const GpuUndo& undo,
                                            const GpuContainerEdits& edits) const {
  const VfioUndo* item = FindItem(undo, device.name);
  if (item == nullptr) return Edits(device, edits);
  const bool iommufd = item->prefer_iommufd && edits.IommuFdEnabled();
  std::string cdev;
  if (iommufd) {
    NVDRA_RETURN_IF_ERROR(CheckWired());
    NVDRA_ASSIGN_OR_RETURN(devices::PciDeviceState s, pci_->Read(item->pci_bus_id));
    cdev = s.iommufd_cdev;
  }
  if (!iommufd && !item->iommu_group) return FailedPrecondition("GPU " + item->pci_bus_id + " has no IOMMU group");
  auto e = VfioEdits(edits, item->iommu_group.value_or(-1), iommufd, cdev);
  if (!e.ok()) return e.status().Wrap("GPU " + item->pci_bus_id + " on vfio-pci");
  return e;
}

Status VfioType::Plan(const std::vector<const GpuDevice*>& devices, GpuUndo& undo) const {
  NVDRA_RETURN_IF_ERROR(CheckWired());
  for (const GpuDevice* d : devices) {
    NVDRA_ASSIGN_OR_RETURN(devices::PciDeviceState s, pci_->Read(d->gpu->pci_bus_id));
    VfioUndo v;
    v.device = d->name;
    v.pci_bus_id = d->gpu->pci_bus_id;
    v.iommu_group = s.iommu_group;
    if (!d->gpu->uuid.empty()) {
      v.gpu_uuid = d->gpu->uuid;
      v.gpu_minor = d->gpu->minor;
      // A GPU on no driver is one an earlier attempt of the claim unbound
      // from nvidia, after it turned persistence mode off: the retry's
      // record must still turn it on again at Unprepare.
      const bool from_nvidia = s.driver == devices::kNvidiaPciDriver || s.driver.empty();
      v.restore_persistence = control_ != nullptr && from_nvidia && !host_.persistenced_socket.empty() &&
                              PathExists(host_.persistenced_socket);
    }
    undo.Get<PassthroughUndo>().gpus.push_back(std::move(v));
  }
  return Status::Ok();
}

Status VfioType::CheckIommuGroup(const VfioUndo& v, const devices::PciDeviceState& s) {
  if (!s.iommu_group) return FailedPrecondition("GPU " + v.pci_bus_id + " has no IOMMU group");
  NVDRA_ASSIGN_OR_RETURN(std::vector<std::string> members, pci_->IommuGroupDevices(*s.iommu_group));
  for (const auto& m : members) {
    if (m == v.pci_bus_id) continue;
    NVDRA_ASSIGN_OR_RETURN(devices::PciDeviceState other, pci_->Read(m));
    if (!other.driver.empty() && other.driver != devices::kVfioPciDriver) {
      return FailedPrecondition("IOMMU group " + std::to_string(*s.iommu_group) + " of GPU " + v.pci_bus_id +
                                " also holds " + m + ", bound to " + other.driver +
                                "; every device of the group must be bound to vfio-pci or to no driver");
    }
  }
  return Status::Ok();
}

Status VfioType::ApplyOne(const VfioUndo& v) {
  NVDRA_ASSIGN_OR_RETURN(bool iommu, pci_->IommuEnabled());
  if (!iommu) return FailedPrecondition("IOMMU is not enabled in the kernel");
  NVDRA_ASSIGN_OR_RETURN(devices::PciDeviceState s, pci_->Read(v.pci_bus_id));
  if (s.driver == devices::kVfioPciDriver) return Status::Ok();
  // On no driver: an earlier attempt of this claim, whose record names the
  // GPU, unbound it from nvidia and was cut short before the bind (the
  // record is written before the first change, and the claim holds the GPU
  // meanwhile). The retry resumes with the bind; nothing can hold a GPU
  // that no driver serves.
  const bool resume = s.driver.empty();
  if (!resume && s.driver != devices::kNvidiaPciDriver) {
    return FailedPrecondition("GPU \"" + v.pci_bus_id + "\" is bound to \"" + s.driver + "\" driver, expected \"" +
                              devices::kVfioPciDriver + "\" or \"" + devices::kNvidiaPciDriver + "\"");
  }
  if (s.num_vfs > 0) {
    return FailedPrecondition("error verifying disabled VFs: gpu has " + std::to_string(s.num_vfs) +
                              " VFs, cannot unbind");
  }
  NVDRA_RETURN_IF_ERROR(CheckIommuGroup(v, s));
  NVDRA_RETURN_IF_ERROR(EnsureModule());
  if (resume) {
    NVDRA_INFO("GPU {} is on no driver, left so by an earlier attempt; binding it to {}", v.pci_bus_id,
               devices::kVfioPciDriver);
  } else {
    if (v.restore_persistence) {
      NVDRA_RETURN_IF_ERROR(control_->SetPersistenceMode(v.gpu_uuid, false)
                                .Wrap("error disabling persistence mode for GPU \"" + v.pci_bus_id + "\""));
    }
    NVDRA_RETURN_IF_ERROR(AwaitGpuFree(v).Wrap("error waiting for GPU \"" + v.pci_bus_id + "\" to be free"));
    NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT("vfio-before-unbind"));
    NVDRA_RETURN_IF_ERROR(pci_->Unbind(v.pci_bus_id).Wrap("error changing driver for GPU \"" + v.pci_bus_id + "\""));
    NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT("vfio-after-unbind"));
  }
  return pci_->Bind(v.pci_bus_id, devices::kVfioPciDriver)
      .Wrap("error changing driver for GPU \"" + v.pci_bus_id + "\"");
}

Status VfioType::Apply(GpuUndo& undo) {
  if (undo.Of<PassthroughUndo>().gpus.empty()) return Status::Ok();
  NVDRA_RETURN_IF_ERROR(CheckWired());
  for (const auto& v : undo.Of<PassthroughUndo>().gpus) NVDRA_RETURN_IF_ERROR(ApplyOne(v));
  return Status::Ok();
}

Status VfioType::Undo(const std::string& claim_uid, const GpuUndo& undo) {
  if (undo.Of<PassthroughUndo>().gpus.empty()) return Status::Ok();
  NVDRA_RETURN_IF_ERROR(CheckWired());
  Status first;
  for (const auto& v : undo.Of<PassthroughUndo>().gpus) {
    Status s = devices::ChangePciDriver(*pci_, v.pci_bus_id, devices::kNvidiaPciDriver);
    if (s.code() == StatusCode::kNotFound) {
      NVDRA_WARN("claim {}: GPU {} is gone from sysfs; nothing to bind back", claim_uid, v.pci_bus_id);
      continue;
    }
    if (!s.ok() && first.ok()) first = s.Wrap("error unconfiguring vfio device \"" + v.device + "\"");
    if (s.ok() && v.restore_persistence && control_ != nullptr) {
      // The GPU works without persistence mode: a failure is no reason to
      // keep the claim (and its GPU) from being released.
      Status p = control_->SetPersistenceMode(v.gpu_uuid, true);
      if (!p.ok()) {
        NVDRA_WARN("claim {}: GPU {} is back on nvidia, but persistence mode could not be enabled again: {}", claim_uid,
                   v.pci_bus_id, p.ToString());
      }
    }
  }
  return first;
}

Result<int> VfioType::SweepOrphans(const devices::NodeInventory& inventory, const UndoRecords& undo_records) {
  NVDRA_RETURN_IF_ERROR(CheckWired());
  std::vector<std::string> on_vfio;
  for (const devices::GpuInfo* g : ByBusId(inventory)) {
    if (g->pci_bus_id.empty()) continue;
    auto s = pci_->Read(g->pci_bus_id);
    if (s.ok() && s->driver == devices::kVfioPciDriver) on_vfio.push_back(g->pci_bus_id);
  }
  if (on_vfio.empty()) return 0;
  // Read after the listing: a Prepare that binds a GPU after it is listed
  // has written its record before.
  NVDRA_ASSIGN_OR_RETURN(std::vector<GpuUndo> records, undo_records());
  std::set<std::string> owned;
  for (const auto& r : records) {
    for (const auto& v : r.Of<PassthroughUndo>().gpus) owned.insert(v.pci_bus_id);
  }
  int n = 0;
  Status first;
  for (const auto& bus : on_vfio) {
    if (owned.count(bus) != 0) continue;
    Status s = devices::ChangePciDriver(*pci_, bus, devices::kNvidiaPciDriver);
    if (s.ok()) {
      NVDRA_INFO("GPU {} was left on vfio-pci by no prepared claim; bound back to nvidia", bus);
      ++n;
    } else if (first.ok()) {
      first = s;
    }
  }
  if (!first.ok()) return first;
  return n;
}

Status VfioType::EnsureModule() {
  NVDRA_ASSIGN_OR_RETURN(bool loaded, pci_->ModuleLoaded(kVfioPciModule));
  if (loaded) return Status::Ok();
  Status s = host_.load_module ? host_.load_module(kVfioPciModule)
                               : devices::RunCommand({"chroot", host_.host_root, "modprobe", kVfioPciModule}, {});
  if (!s.ok()) return s.Wrap(std::string("failed to load module \"") + kVfioPciModule + "\"");
  NVDRA_ASSIGN_OR_RETURN(loaded, pci_->ModuleLoaded(kVfioPciModule));
  if (!loaded) return FailedPrecondition(std::string("module \"") + kVfioPciModule + "\" is not loaded after modprobe");
  return Status::Ok();
}

Status VfioType::AwaitGpuFree(const VfioUndo& v) const {
  // A GPU on vfio-pci already has no node to hold.
  if (!v.gpu_minor) return Status::Ok();
  const std::string node = JoinPath(host_.dev_dir, "nvidia" + std::to_string(*v.gpu_minor));
  const auto deadline = std::chrono::steady_clock::now() + host_.gpu_free_timeout;
  while (true) {
    auto holders = devices::ProcessesHolding(host_.proc_root, node);
    if (holders.status().code() == StatusCode::kNotFound) return Status::Ok();
    NVDRA_RETURN_IF_ERROR(holders.status());
    if (holders->empty()) return Status::Ok();
    if (std::chrono::steady_clock::now() >= deadline) {
      return FailedPrecondition("gpu device \"" + v.pci_bus_id +
                                "\" has open fds by process(es): " + devices::DescribeHolders(*holders) + " (" + node +
                                ", waited " + std::to_string(host_.gpu_free_timeout.count() / 1000) + " s)");
    }
    std::this_thread::sleep_for(host_.gpu_free_poll);
  }
}

Status VfioType::AddGpusOnVfio(devices::PciDriverControl& pci, devices::NodeInventory& inventory) {
  std::set<std::string> known;
  for (const auto& g : inventory.gpus) known.insert(g.pci_bus_id);
  for (const auto& g : inventory.vfio_gpus) known.insert(g.pci_bus_id);
  NVDRA_ASSIGN_OR_RETURN(std::vector<std::string> all, pci.ListDevices());
  for (const auto& bus : all) {
    if (known.count(bus) != 0) continue;
    auto s = pci.Read(bus);
    if (!s.ok() || !devices::IsNvidiaGpu(*s)) continue;
    if (s->driver != devices::kVfioPciDriver && !s->driver.empty()) continue;
    devices::GpuInfo g;
    g.minor = -1;
    g.pci_bus_id = bus;
    g.pcie_root = s->pcie_root;
    g.numa_node = s->numa_node;
    NVDRA_INFO("GPU {} is bound to {}: published for passthrough only", bus,
               s->driver.empty() ? "no driver" : s->driver);
    inventory.vfio_gpus.push_back(std::move(g));
  }
  return Status::Ok();
}

std::function<bool(const std::string& device)> DevicePreparedIn(const driver::ClaimsView& claims) {
  return [&claims](const std::string& device) { return claims.PreparedByLiveClaim(device, kDriverName); };
}

Result<PassthroughHost> PassthroughHostAt(const std::string& host_root, const std::string& container_driver_root) {
  if (host_root.empty())
    return InvalidArgument("host root is required when PassthroughSupport feature gate is enabled");
  struct stat st;
  if (::stat(host_root.c_str(), &st) != 0) {
    if (errno == ENOENT) return FailedPrecondition("host root is not mounted at \"" + host_root + "\"");
    return Internal("error checking if host root is mounted at \"" + host_root + "\": " + ErrnoText(errno));
  }
  PassthroughHost h;
  h.host_root = host_root;
  const std::string host_proc = JoinPath(host_root, "proc");
  if (auto self = ListDirectory(JoinPath(host_proc, "self")); self.ok() && !self->empty()) h.proc_root = host_proc;
  h.dev_dir = JoinPath(container_driver_root, "dev");
  h.persistenced_socket = JoinPath(container_driver_root, "run/nvidia-persistenced/socket");
  return h;
}

namespace {

class PassthroughDecoration final : public FullGpuDecoration {
 public:
  void Decorate(const devices::NodeInventory& inventory, GpuDevice& device) const override {
    const devices::GpuInfo& g = *device.gpu;
    if (!g.mig_enabled && g.migs.empty()) device.twin = VfioTwinName(inventory, g.pci_bus_id);
  }
  void AddHeld(const GpuDevice& device, std::vector<std::string>& held) const override {
    if (!device.gpu->pci_bus_id.empty()) held.push_back(PciResource(device.gpu->pci_bus_id));
    if (!device.twin.empty()) held.push_back(device.twin);
  }
  using FullGpuDecoration::Decorate;
};

}  // namespace

std::shared_ptr<const FullGpuDecoration> PassthroughGpuDecoration() {
  return std::make_shared<PassthroughDecoration>();
}

}  // namespace nvdra::gpu
