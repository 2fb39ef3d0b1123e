#include "kube/yaml_json.h"

#include <regex>
#include <stdexcept>
#include <string>

#include "util/parse_number.h"

namespace nvdra::kube {
namespace {

// yaml-cpp's parser stops at 500 levels, but a node built in code has no
// such limit, and the conversion recurses once per level.
constexpr int kMaxYamlDepth = 500;

nlohmann::ordered_json Scalar(const YAML::Node& node) {
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

nlohmann::ordered_json Convert(const YAML::Node& node, int depth) {
  if (depth > kMaxYamlDepth) {
    throw std::invalid_argument("YAML nests deeper than " + std::to_string(kMaxYamlDepth) + " levels");
  }
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined: return nullptr;
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
    case YAML::NodeType::Scalar: return Scalar(node);
  }
  return nullptr;
}

}  // namespace

nlohmann::ordered_json YamlNodeToJson(const YAML::Node& node) { return Convert(node, 0); }

Result<nlohmann::json> YamlDocumentToJson(std::string_view text, std::string_view what) {
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(std::string(what) + " is not valid YAML: " + e.what());
  }
  size_t n = 0;
  const YAML::Node* doc = nullptr;
  for (const auto& d : docs) {
    if (d.IsNull()) continue;
    ++n;
    doc = &d;
  }
  if (n != 1) return InvalidArgument(std::string(what) + " holds " + std::to_string(n) + " YAML documents; want 1");
  try {
    return nlohmann::json::parse(YamlNodeToJson(*doc).dump());
  } catch (const std::exception& e) {
    return InvalidArgument(std::string(what) + ": " + e.what());
  }
}

}  // namespace nvdra::kube
