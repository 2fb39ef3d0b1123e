#include "gpu/mps_strategy.h"

#include <algorithm>

namespace nvdra::gpu {

std::string_view MpsStrategy::name() const { return config::kMpsStrategy; }

Status MpsStrategy::Plan(const config::ConfigGroup& group, const GpuDeviceLookup&, GpuUndo&) const {
  std::vector<std::string> requests;
  for (const auto& r : group.results) {
    if (std::find(requests.begin(), requests.end(), r.request) == requests.end()) requests.push_back(r.request);
  }
  std::string list;
  for (const auto& r : requests) list += (list.empty() ? "" : ", ") + r;
  return FailedPrecondition("MPS sharing is not supported yet by nvdra (requests: " + list + ")");
}

}  // namespace nvdra::gpu
