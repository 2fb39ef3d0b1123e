#include "computedomain/compute_domain_edits.h"

#include "devices/nvcaps.h"

namespace nvdra::computedomain {

Result<cdi::ContainerEdits> ComputeDomainEdits::Channel(int channel) const {
  cdi::ContainerEdits e;
  NVDRA_ASSIGN_OR_RETURN(auto n, src_.nodes.ImexChannel(channel));
  e.device_nodes.push_back(n);
  return e;
}

Result<cdi::ContainerEdits> ComputeDomainEdits::FabricImexMgmt() const {
  cdi::ContainerEdits e;
  NVDRA_ASSIGN_OR_RETURN(auto n, src_.nodes.Capability(devices::kFabricImexMgmtCap));
  e.device_nodes.push_back(n);
  return e;
}

Result<cdi::ContainerEdits> ComputeDomainEdits::Management() const {
  cdi::ContainerEdits e;
  NVDRA_ASSIGN_OR_RETURN(e.device_nodes, src_.nodes.AllNvidiaNodes());
  return e;
}

Result<cdi::Spec> ComputeDomainEdits::BaseSpec(const std::string& vendor) const {
  cdi::Spec spec;
  spec.kind = vendor + "/device";
  NVDRA_ASSIGN_OR_RETURN(auto all, Management());
  spec.devices.push_back({"all", std::move(all)});
  if (src_.driver_files != nullptr) {
    auto files = src_.driver_files->CommonEdits();
    if (!files.ok()) return files.status().Wrap("driver files");
    spec.edits = **files;
  }
  spec.edits.env.push_back("NVIDIA_VISIBLE_DEVICES=void");
  return spec;
}

}  // namespace nvdra::computedomain
