// A cheap guard against deeply nested JSON. Parsing and walking a document
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

// InvalidArgument naming `what` when `text` nests deeper than `max_depth`.
Status CheckJsonDepth(std::string_view text, std::string_view what, size_t max_depth = kMaxJsonDepth);

}  // namespace nvdra
