// Finds the exact bytes of a JSON value inside a document, so values we must
// keep verbatim (opaque driver parameters, the claim status) survive a decode
// without being re-serialised.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace nvdra::kube {

// One step of a path: an object member name or an array index.
using JsonPathStep = std::variant<std::string, size_t>;

// The raw text of the value at `path` in `doc` (a valid JSON document), or
// nullopt when the path does not exist.
std::optional<std::string_view> FindRawJson(std::string_view doc, const std::vector<JsonPathStep>& path);

}  // namespace nvdra::kube
