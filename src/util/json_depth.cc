#include "util/json_depth.h"

#include <string>

namespace nvdra {

size_t CountJsonValues(std::string_view text, size_t limit) {
  size_t n = 1;
  bool in_string = false;
  bool just_opened = false;  // the last character was the [ or { of an array or object
  for (size_t i = 0; i < text.size() && n <= limit; ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (just_opened && c != ']' && c != '}') ++n;
    just_opened = c == '[' || c == '{';
    if (c == '"') in_string = true;
    if (c == ',') ++n;
  }
  return n;
}

size_t JsonNestingDepth(std::string_view text, size_t limit) {
  size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '[':
      case '{':
        if (++depth > deepest) {
          deepest = depth;
          if (deepest > limit) return limit + 1;
        }
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default: break;
    }
  }
  return deepest;
}

Status CheckJsonDepth(std::string_view text, std::string_view what, size_t max_depth) {
  if (JsonNestingDepth(text, max_depth) > max_depth) {
    return InvalidArgument(std::string(what) + " nests arrays or objects deeper than " + std::to_string(max_depth) +
                           " levels; refusing to decode it");
  }
  return Status::Ok();
}

}  // namespace nvdra
