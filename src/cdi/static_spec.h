// CDI spec files that belong to a plugin rather than to a claim, such as the
// ComputeDomain plugin's base spec "<vendor>-device_base": rewritten at every
// start, kept while the plugin runs. Written like claim specs (validated,
// byte-stable JSON, atomic, mode 0644) and replacing a .yaml of the same name
// that the upstream driver wrote, which would otherwise define the same
// devices twice.
#pragma once

#include <string>

#include "cdi/spec.h"
#include "util/status.h"

namespace nvdra::cdi {

// Writes `spec` to <root>/<name>.json (e.g. name
// "k8s.compute-domain.nvidia.com-device_base"), skipping the write when the
// file already holds the same bytes, and removes <root>/<name>.yaml.
Status WriteStaticSpec(const std::string& root, const std::string& name, const Spec& spec);

}  // namespace nvdra::cdi
