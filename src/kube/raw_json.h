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

// The raw text of each element of the array at `path` in `doc`, in order, or
// nullopt when there is no array there. One pass: looking up each element
// with FindRawJson reads the document once per element, which a body of
// thousands of elements turns into seconds. `bytes_read`, when given, is set
// to how many bytes of `doc` the pass read (bytes read twice count twice),
// so tests can pin that the cost is linear in the document's size.
std::optional<std::vector<std::string_view>> FindRawJsonElements(std::string_view doc,
                                                                 const std::vector<JsonPathStep>& path,
                                                                 size_t* bytes_read = nullptr);

}  // namespace nvdra::kube
