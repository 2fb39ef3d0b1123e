#include "config/opaque_config.h"

#include <nlohmann/json.hpp>

#include "config/config_kind.h"

namespace nvdra::config {

bool operator==(const Config& a, const Config& b) {
  if (a.kind_ != b.kind_) return false;
  return a.kind_ == nullptr || a.kind_->equal(a, b);
}

std::string_view KindOf(const Config& config) {
  return config.kind() == nullptr ? std::string_view() : std::string_view(config.kind()->kind);
}

void Normalize(Config& config, const FeatureGates& gates) {
  if (config.kind() != nullptr && config.kind()->normalize) config.kind()->normalize(config, gates);
}

Status Validate(const Config& config, const FeatureGates& gates) {
  if (config.kind() == nullptr || !config.kind()->validate) return Status::Ok();
  return config.kind()->validate(config, gates);
}

std::string ToCanonicalJson(const Config& config) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  const ConfigKind* kind = config.kind();
  if (kind == nullptr) return j.dump();
  j["kind"] = kind->kind;
  j["apiVersion"] = kind->api_version;
  if (kind->write_fields) kind->write_fields(config, j);
  return j.dump();
}

}  // namespace nvdra::config
