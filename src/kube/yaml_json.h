// YAML manifests as the JSON the API server takes: a template rendered to
// YAML (the MPS control daemon's Deployment) is posted as JSON, and tests
// feed upstream's YAML user specs to the decoders that read JSON.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "util/status.h"

namespace nvdra::kube {

// JSON for a YAML node. Plain scalars become null, bool, integer or float
// when they look like one (YAML 1.2 core schema), quoted ones strings; map
// keys keep their order. Throws std::invalid_argument for nesting deeper
// than 500 levels.
nlohmann::ordered_json YamlNodeToJson(const YAML::Node& node);

// The one YAML document in `text` as JSON; InvalidArgument naming `what`
// for bad YAML, no document, or more than one.
Result<nlohmann::json> YamlDocumentToJson(std::string_view text, std::string_view what);

}  // namespace nvdra::kube
