// What IMEX channel and daemon claims' containers get, and the base spec
// the ComputeDomain plugin writes at start.
#pragma once

#include <memory>
#include <string>

#include "cdi/container_edits.h"
#include "cdi/spec.h"
#include "devices/toolkit/container_sources.h"

namespace nvdra::computedomain {

class ComputeDomainEdits {
 public:
  // Only the base spec uses the driver files.
  explicit ComputeDomainEdits(devices::ContainerSources sources) : src_(std::move(sources)) {}

  // /dev/nvidia-caps-imex-channels/channel<id>, created if needed.
  Result<cdi::ContainerEdits> Channel(int channel) const;
  // The fabric-imex-mgmt capability node an IMEX daemon needs.
  Result<cdi::ContainerEdits> FabricImexMgmt() const;
  // The toolkit's management device ("all"): every NVIDIA character device
  // under the dev root. NotFound when there is none.
  Result<cdi::ContainerEdits> Management() const;
  // The base spec, as upstream writes it at start: kind <vendor>/device, one
  // device "all" with Management(), and the driver files' edits plus
  // NVIDIA_VISIBLE_DEVICES=void at spec level.
  Result<cdi::Spec> BaseSpec(const std::string& vendor) const;

  const devices::ImexChannels& imex_channels() const { return src_.nodes.imex_channels(); }

 private:
  devices::ContainerSources src_;
};

}  // namespace nvdra::computedomain
