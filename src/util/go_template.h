// Renders the subset of Go's text/template that Kubernetes manifest
// templates use, so a template written for the upstream driver (the MPS
// control daemon's Deployment) renders the same here:
//
//   {{ .Field }} {{ .A.B }} {{ . }} {{ $var }}       values
//   {{ if X }} ... {{ else if Y }} ... {{ else }} ... {{ end }}
//   {{ range X }} ... {{ end }}                      over a list; `.` is the item
//   {{ range $k, $v := X }} ... {{ end }}             over a map, keys sorted (as Go)
//   {{- ... -}}                                      trim the white space beside
//   {{/* comment */}}
//
// The data is JSON: objects are structs or maps, arrays lists. A value
// prints as Go prints it (strings raw, true/false, integers); null prints
// "<no value>". Truth is Go's: false, 0, "", null and empty lists and maps
// are false. Anything else in an action (functions, pipelines, with,
// define) is an InvalidArgument naming the template and line, as is a field
// that the data lacks.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace nvdra {

// `name` names the template in errors ("mps-control-daemon.tmpl.yaml").
Result<std::string> RenderGoTemplate(std::string_view name, std::string_view text, const nlohmann::json& data);

}  // namespace nvdra
