#include "config/yaml_to_json.h"

#include <string>

#include "kube/yaml_json.h"

namespace nvdra::config::testing {

std::string YamlToJson(const YAML::Node& node) { return kube::YamlNodeToJson(node).dump(); }

std::vector<ManifestConfig> OpaqueConfigsInManifest(const std::string& yaml_text) {
  std::vector<ManifestConfig> out;
  for (const YAML::Node& doc : YAML::LoadAll(yaml_text)) {
    if (!doc.IsMap() || !doc["kind"]) continue;
    std::string kind = doc["kind"].as<std::string>();
    YAML::Node devices;
    if (kind == "ResourceClaim") {
      devices = doc["spec"]["devices"];
    } else if (kind == "ResourceClaimTemplate") {
      devices = doc["spec"]["spec"]["devices"];
    } else {
      continue;
    }
    if (!devices || !devices["config"]) continue;
    for (const YAML::Node& entry : devices["config"]) {
      ManifestConfig mc;
      mc.object_kind = kind;
      mc.object_name = doc["metadata"]["name"].as<std::string>();
      mc.config.source = ConfigSource::kFromClaim;
      if (entry["requests"]) {
        for (const auto& r : entry["requests"]) mc.config.requests.push_back(r.as<std::string>());
      }
      if (entry["opaque"]) {
        mc.config.driver = entry["opaque"]["driver"].as<std::string>();
        mc.config.parameters_json = YamlToJson(entry["opaque"]["parameters"]);
      } else {
        mc.config.opaque = false;
      }
      out.push_back(std::move(mc));
    }
  }
  return out;
}

}  // namespace nvdra::config::testing
