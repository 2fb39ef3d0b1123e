// Cheap guards against hostile JSON: too deep, or too many values.
// Depth: parsing and walking a document
// recurses once per nesting level in places (copies, comparisons, dumps,
// typed decoders), so a document nested tens of thousands deep overflows the
// stack. Every decode of JSON that comes from outside the process (API
// server answers, opaque configs, persisted records) checks the depth first.
#pragma once

#include <cstddef>
#include <string_view>

#include "util/status.h"

namespace nvdra {

// Kubernetes objects nest a few dozen levels at most; this leaves ample room
// while keeping every recursive walk far from any thread's stack limit.
inline constexpr size_t kMaxJsonDepth = 256;

// The deepest nesting of arrays and objects in `text`, counting brackets
// outside strings; stops early and returns `limit + 1` once it passes
// `limit`. Works on malformed text too (the parser reports that).
size_t JsonNestingDepth(std::string_view text, size_t limit);

// How many values `text` holds, counted without parsing: the root, and in
// each array or object that is not empty, one value (or member) more than
// the commas between them. Outside strings only; stops counting once past
// `limit`. Linear, and far cheaper than a parse it guards (a body of a few
// MiB that is all `{},` parses into a million objects).
size_t CountJsonValues(std::string_view text, size_t limit);

// InvalidArgument naming `what` when `text` nests deeper than `max_depth`.
Status CheckJsonDepth(std::string_view text, std::string_view what, size_t max_depth = kMaxJsonDepth);

}  // namespace nvdra
