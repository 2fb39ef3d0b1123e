#include "gpu/gpu_container_edits.h"

#include "devices/nvcaps.h"

namespace nvdra::gpu {

Result<cdi::ContainerEdits> GpuContainerEdits::Common() const {
  std::vector<cdi::DeviceNode> nodes;
  NVDRA_ASSIGN_OR_RETURN(auto ctl, src_.nodes.Existing("/dev/nvidiactl"));
  nodes.push_back(std::move(ctl));
  for (const char* optional : {"/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"}) {
    // nvidia-uvm is loaded on demand; CUDA works without the node at start.
    auto n = src_.nodes.Existing(optional);
    if (n.ok()) nodes.push_back(std::move(n).value());
  }
  std::shared_ptr<const cdi::ContainerEdits> files;
  if (src_.driver_files != nullptr) {
    auto f = src_.driver_files->CommonEdits();
    if (!f.ok()) return f.status().Wrap("driver files");
    files = std::move(f).value();
  }
  MutexLock l(common_->mu);
  if (common_->edits == nullptr || common_->files != files || common_->nodes != nodes) {
    auto e = std::make_shared<cdi::ContainerEdits>();
    e->device_nodes = nodes;
    if (files != nullptr) e->Append(*files);
    // As the toolkit's common edits end: the NVIDIA container runtime, should
    // it run beside CDI, then injects nothing of its own.
    e->env.push_back("NVIDIA_VISIBLE_DEVICES=void");
    common_->edits = std::move(e);
    common_->files = std::move(files);
    common_->nodes = std::move(nodes);
  }
  return *common_->edits;
}

Result<cdi::ContainerEdits> GpuContainerEdits::FullGpu(const devices::GpuInfo& gpu) const {
  cdi::ContainerEdits e;
  NVDRA_ASSIGN_OR_RETURN(auto n, src_.nodes.Existing("/dev/nvidia" + std::to_string(gpu.minor)));
  e.device_nodes.push_back(n);
  if (src_.driver_files == nullptr || gpu.pci_bus_id.empty()) return e;
  // DRM nodes only with driver files: they are part of the toolkit's full
  // device spec, which is what driver files stand for.
  devices::DrmNodes drm = devices::FindDrmNodes(src_.nodes.root(), gpu.pci_bus_id);
  for (const auto& path : drm.nodes) {
    auto node = src_.nodes.Existing(path);
    if (node.ok()) e.device_nodes.push_back(*node);
  }
  if (!drm.links.empty() && !src_.driver_files->hook_path().empty()) {
    std::vector<std::string> args;
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
