#include "ledger/kind_codec.h"

#include <algorithm>

namespace nvdra::ledger {

const std::vector<nlohmann::json>& UpstreamClaim::ParametersFor(const std::string& request) const {
  static const std::vector<nlohmann::json> kNone;
  auto it = config_parameters.find(request);
  return it == config_parameters.end() ? kNone : it->second;
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
