// Test support: turns YAML manifests (the upstream user specs) into JSON text
// the way the API server would store them, so tests feed the decoder the
// bytes a kubelet plugin really receives.
#pragma once

#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/config_resolver.h"

namespace nvdra::config::testing {

// JSON text for a YAML node. Plain scalars become null, bool, integer or
// float when they look like one (YAML 1.2 core schema), quoted ones strings.
std::string YamlToJson(const YAML::Node& node);

// One opaque config found in a manifest.
struct ManifestConfig {
  std::string object_kind;  // ResourceClaim or ResourceClaimTemplate
  std::string object_name;
  ClaimConfig config;
};

// Every `spec.devices.config` entry (or `spec.spec.devices.config` for
// templates) of every document in `yaml_text`, in document order.
std::vector<ManifestConfig> OpaqueConfigsInManifest(const std::string& yaml_text);

}  // namespace nvdra::config::testing
