#include "gpu/gpu_container_edits.h"

#include "devices/nvcaps.h"

namespace nvdra::gpu {

Result<cdi::ContainerEdits> GpuContainerEdits::Common() const {
  NVDRA_ASSIGN_OR_RETURN(auto shared, SharedCommon());
  return *shared;
}

Result<std::shared_ptr<const cdi::ContainerEdits>> GpuContainerEdits::SharedCommon() const {
  // /dev/nvidiactl first (required), then the optional nodes: nvidia-uvm is
  // loaded on demand, and CUDA works without the node at start.
  static const std::vector<std::string> kNodes = {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                                                  "/dev/nvidia-modeset"};
  devices::DeviceNodes::Presence presence = src_.nodes.Present(kNodes);
  if ((presence.found & 1u) == 0) {
    // Existing says what is missing and what to check.
    NVDRA_RETURN_IF_ERROR(src_.nodes.Existing(kNodes[0]).status());
  }
  std::shared_ptr<const cdi::ContainerEdits> files;
  if (src_.driver_files != nullptr) {
    auto f = src_.driver_files->CommonEdits();
    if (!f.ok()) return f.status().Wrap("driver files");
    files = std::move(f).value();
  }
  MutexLock l(common_->mu);
  if (common_->edits != nullptr && common_->files == files && common_->presence == presence) return common_->edits;
  auto e = std::make_shared<cdi::ContainerEdits>();
  NVDRA_ASSIGN_OR_RETURN(auto ctl, src_.nodes.Existing(kNodes[0]));
  e->device_nodes.push_back(std::move(ctl));
  for (size_t i = 1; i < kNodes.size(); ++i) {
    auto n = src_.nodes.Existing(kNodes[i]);
    if (n.ok()) e->device_nodes.push_back(std::move(n).value());
  }
  if (files != nullptr) e->Append(*files);
  // As the toolkit's common edits end: the NVIDIA container runtime, should
  // it run beside CDI, then injects nothing of its own.
  e->env.push_back("NVIDIA_VISIBLE_DEVICES=void");
  common_->edits = std::move(e);
  common_->files = std::move(files);
  common_->presence = std::move(presence);
  return common_->edits;
}

Result<cdi::ContainerEdits> GpuContainerEdits::FullGpu(const devices::GpuInfo& gpu) const {
  cdi::ContainerEdits e;
  NVDRA_ASSIGN_OR_RETURN(auto n, src_.nodes.Existing("/dev/nvidia" + std::to_string(gpu.minor)));
  e.device_nodes.push_back(std::move(n));
  if (src_.driver_files == nullptr || gpu.pci_bus_id.empty()) return e;
  // DRM nodes only with driver files: they are part of the toolkit's full
  // device spec, which is what driver files stand for.
  devices::DrmNodes drm = devices::FindDrmNodes(src_.nodes.root(), gpu.pci_bus_id);
  for (const auto& path : drm.nodes) {
    auto node = src_.nodes.Existing(path);
    if (node.ok()) e.device_nodes.push_back(std::move(node).value());
  }
  if (!drm.links.empty() && !src_.driver_files->hook_path().empty()) {
    std::vector<std::string> args;
    args.reserve(2 * drm.links.size());
    for (const auto& l : drm.links) {
      args.push_back("--link");
      args.push_back(l);
    }
    e.hooks.push_back(devices::CdiHook(src_.driver_files->hook_path(), "create-symlinks", std::move(args)));
  }
  return e;
}

bool GpuContainerEdits::IommuFdEnabled() const { return src_.nodes.Existing("/dev/iommu").ok(); }

}  // namespace nvdra::gpu
