// A JSON document parsed without losing anything a strict decoder must see:
// object members stay in document order and duplicate keys are kept, so the
// config decoder can report `duplicate field "x"` the way Kubernetes' strict
// decoder does (nlohmann's DOM silently keeps only the last duplicate).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/status.h"

namespace nvdra::config {

struct JsonMember;

struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

  Type type = Type::kNull;
  bool boolean = false;
  // The string value, or the number literal (integers re-rendered in decimal).
  std::string text;
  // True for numbers written without fraction or exponent that fit 64 bits.
  bool is_integer = false;
  std::vector<JsonValue> elements;
  // A named struct rather than std::pair: a pair of an incomplete type is
  // rejected by clang with libstdc++ in C++20 mode.
  std::vector<JsonMember> members;

  // "string", "number", "bool", "array", "object", "null": the words Go's
  // encoding/json uses in type errors.
  std::string_view TypeName() const;
};

struct JsonMember {
  std::string first;  // the key
  JsonValue second;   // the value
};

struct JsonParseLimits {
  // Opaque parameters are at most 10 KiB in the API; anything much larger is
  // not a config and is refused before it costs memory.
  size_t max_bytes = 1 << 20;
  // Configs nest four levels; the limit keeps destruction and decoding
  // recursion trivially bounded.
  int max_depth = 64;
};

// Parses one JSON text (RFC 8259, UTF-8). Errors start with "json parse error:".
Result<JsonValue> ParseJson(std::string_view text, const JsonParseLimits& limits = {});

}  // namespace nvdra::config
