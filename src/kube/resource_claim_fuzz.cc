// Fuzz target for the ResourceClaim decoder and the raw-JSON scanner under it:
// any input must decode or fail cleanly, the one-pass reading must give the
// tree reading's claim whenever it gives one, and for valid JSON the raw
// bytes we keep for opaque parameters must parse to the same value nlohmann
// sees.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "kube/raw_json.h"
#include "kube/resource_claim.h"
#include "util/json_depth.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto claim = nvdra::kube::DecodeResourceClaim(text);
  // The one-pass reading answers only with the tree reading's claim.
  if (auto fast = nvdra::kube::DecodeResourceClaimFast(text)) {
    auto tree = nvdra::kube::DecodeResourceClaimTree(text);
    if (!tree.ok() || !(*tree == *fast)) std::abort();
  }
  // Too deep to decode: it must have been refused, and the checks below
  // (recursive comparisons) are not for such documents.
  if (nvdra::JsonNestingDepth(text, nvdra::kMaxJsonDepth) > nvdra::kMaxJsonDepth) {
    if (claim.ok()) std::abort();
    return 0;
  }
  // A claim with results names a device in every one of them.
  if (claim.ok()) {
    for (const auto& r : claim->results) {
      if (r.driver.empty() || r.device.empty() || r.pool.empty() || r.request.empty()) std::abort();
    }
  }
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return 0;
  // Valid JSON: every value FindRawJson returns must equal the parsed one.
  for (const auto& [key, value] : j.items()) {
    auto raw = nvdra::kube::FindRawJson(text, {key});
    if (!raw) std::abort();
    if (nlohmann::json::parse(*raw, nullptr, false) != value) std::abort();
  }
  if (claim.ok()) {
    const auto* configs = j.contains("status") && j["status"].is_object() && j["status"].contains("allocation") &&
                                  j["status"]["allocation"].is_object() &&
                                  j["status"]["allocation"].contains("devices") &&
                                  j["status"]["allocation"]["devices"].is_object() &&
                                  j["status"]["allocation"]["devices"].contains("config")
                              ? &j["status"]["allocation"]["devices"]["config"]
                              : nullptr;
    for (size_t i = 0; i < claim->configs.size(); ++i) {
      const auto& c = claim->configs[i];
      if (!c.opaque || c.opaque->parameters.empty() || configs == nullptr) continue;
      const auto& want = (*configs)[i]["opaque"]["parameters"];
      if (nlohmann::json::parse(c.opaque->parameters, nullptr, false) != want) std::abort();
    }
  }
  return 0;
}
