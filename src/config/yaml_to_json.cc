#include "config/yaml_to_json.h"

#include <regex>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "util/parse_number.h"

namespace nvdra::config::testing {
namespace {

// yaml-cpp's parser stops at 500 levels, but a node built in code has no
// such limit, and Convert recurses once per level.
constexpr int kMaxYamlDepth = 500;

nlohmann::ordered_json Convert(const YAML::Node& node, int depth = 0) {
  if (depth > kMaxYamlDepth) {
    throw std::invalid_argument("YAML nests deeper than " + std::to_string(kMaxYamlDepth) + " levels");
  }
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Sequence: {
      nlohmann::ordered_json arr = nlohmann::ordered_json::array();
      for (const auto& item : node) arr.push_back(Convert(item, depth + 1));
      return arr;
    }
    case YAML::NodeType::Map: {
      nlohmann::ordered_json obj = nlohmann::ordered_json::object();
      for (const auto& kv : node) obj[kv.first.as<std::string>()] = Convert(kv.second, depth + 1);
      return obj;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = node.Scalar();
      if (node.Tag() == "!") return s;  // quoted: always a string
      static const std::regex kInt("[-+]?[0-9]+");
      static const std::regex kFloat("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
      if (s == "null" || s == "Null" || s == "NULL" || s == "~") return nullptr;
      if (s == "true" || s == "True" || s == "TRUE") return true;
      if (s == "false" || s == "False" || s == "FALSE") return false;
      // An integer beyond int64 becomes a float, as a JSON decoder reads it.
      if (std::regex_match(s, kInt)) {
        if (Result<int64_t> n = ParseInt64(s); n.ok()) return *n;
      }
      if (std::regex_match(s, kFloat)) {
        if (Result<double> d = ParseDouble(s); d.ok()) return *d;
      }
      return s;
    }
  }
  return nullptr;
}

}  // namespace

std::string YamlToJson(const YAML::Node& node) { return Convert(node).dump(); }

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
