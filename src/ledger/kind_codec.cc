#include "ledger/kind_codec.h"

#include <algorithm>

#include <fmt/format.h>

namespace nvdra::ledger {

const std::vector<nlohmann::json>& UpstreamClaim::ParametersFor(const std::string& request) const {
  static const std::vector<nlohmann::json> kNone;
  auto it = config_parameters.find(request);
  return it == config_parameters.end() ? kNone : it->second;
}

std::string DefaultHeldByAnotherClaim(const std::string& resource, const std::string& holder) {
  return fmt::format("{} already allocated by claim {} (according to checkpoint)", resource, holder);
}

std::string KindCodec::HeldByAnotherClaim(const std::string& resource, const std::string& holder,
                                          const std::vector<std::string>& requested) const {
  return DefaultHeldByAnotherClaim(resource, holder);
}

std::vector<std::string> HeldByDevices(const KindCodec* codec, const std::vector<std::string>& devices) {
  std::vector<std::string> held;
  for (const auto& d : devices) {
    if (codec == nullptr) {
      held.push_back(d);
      continue;
    }
    for (auto& r : codec->HeldResources(d, {})) held.push_back(std::move(r));
  }
  std::sort(held.begin(), held.end());
  held.erase(std::unique(held.begin(), held.end()), held.end());
  return held;
}

}  // namespace nvdra::ledger
