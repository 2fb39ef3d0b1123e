#include "ledger/kind_codec.h"

#include <algorithm>

#include <fmt/format.h>

namespace nvdra::ledger {

namespace {
constexpr UpstreamRelease kReleases[] = {UpstreamRelease::kV25_12_0, UpstreamRelease::kV0_4_0, UpstreamRelease::kV0_4_1,
                                         UpstreamRelease::kMain};
}  // namespace

const char* UpstreamReleaseName(UpstreamRelease r) {
  switch (r) {
    case UpstreamRelease::kV25_12_0: return "v25.12.0";
    case UpstreamRelease::kV0_4_0: return "v0.4.0";
    case UpstreamRelease::kV0_4_1: return "v0.4.1";
    case UpstreamRelease::kMain: return "main";
  }
  return "?";
}

std::optional<UpstreamRelease> ParseUpstreamRelease(std::string_view name) {
  for (UpstreamRelease r : kReleases) {
    std::string_view known = UpstreamReleaseName(r);
    if (name == known || (known.front() == 'v' && name == known.substr(1))) return r;
  }
  return std::nullopt;
}

std::string UpstreamReleaseNames() {
  std::string out;
  for (UpstreamRelease r : kReleases) out += (out.empty() ? "" : ", ") + std::string(UpstreamReleaseName(r));
  return out;
}

const std::vector<nlohmann::json>& UpstreamClaim::ParametersFor(const std::string& request) const {
  static const std::vector<nlohmann::json> kNone;
  auto it = config_parameters.find(request);
  return it == config_parameters.end() ? kNone : it->second;
}

std::string DefaultHeldByAnotherClaim(const std::string& resource, const std::string& holder) {
  return fmt::format("{} already allocated by claim {} (according to checkpoint)", resource, holder);
}

std::string UpstreamHeldByAnotherClaim(const std::string& resource, const std::string& holder,
                                       const std::vector<std::string>& requested) {
  if (std::find(requested.begin(), requested.end(), resource) == requested.end()) {
    return DefaultHeldByAnotherClaim(resource, holder);
  }
  return "requested device " + resource + " is already allocated to different claim " + holder;
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
