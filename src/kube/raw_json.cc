#include "kube/raw_json.h"

#include <nlohmann/json.hpp>

namespace nvdra::kube {
namespace {

class Scanner {
 public:
  explicit Scanner(std::string_view s) : s_(s) {}
  size_t pos = 0;

  void SkipWs() {
    while (pos < s_.size() && (s_[pos] == ' ' || s_[pos] == '\t' || s_[pos] == '\n' || s_[pos] == '\r')) ++pos;
  }
  bool Peek(char c) {
    SkipWs();
    return pos < s_.size() && s_[pos] == c;
  }
  // Skips a string starting at pos (a '"'); false on malformed input.
  bool SkipString() {
    if (pos >= s_.size() || s_[pos] != '"') return false;
    for (++pos; pos < s_.size(); ++pos) {
      if (s_[pos] == '\\') {
        ++pos;
      } else if (s_[pos] == '"') {
        ++pos;
        return true;
      }
    }
    return false;
  }
  // Skips one value; false on malformed input.
  bool SkipValue() {
    SkipWs();
    if (pos >= s_.size()) return false;
    char c = s_[pos];
    if (c == '"') return SkipString();
    if (c == '{' || c == '[') {
      int depth = 0;
      while (pos < s_.size()) {
        char d = s_[pos];
        if (d == '"') {
          if (!SkipString()) return false;
          continue;
        }
        if (d == '{' || d == '[') ++depth;
        if (d == '}' || d == ']') {
          if (--depth == 0) {
            ++pos;
            return true;
          }
        }
        ++pos;
      }
      return false;
    }
    while (pos < s_.size() && s_[pos] != ',' && s_[pos] != '}' && s_[pos] != ']' && s_[pos] != ' ' && s_[pos] != '\n' &&
           s_[pos] != '\r' && s_[pos] != '\t') {
      ++pos;
    }
    return true;
  }
  std::string_view Slice(size_t b, size_t e) const { return s_.substr(b, e - b); }

 private:
  std::string_view s_;
};

std::string DecodeKey(std::string_view quoted) {
  if (quoted.find('\\') == std::string_view::npos) return std::string(quoted.substr(1, quoted.size() - 2));
  try {
    return nlohmann::json::parse(quoted).get<std::string>();
  } catch (...) {
    return {};
  }
}

// Moves `sc` to the value at `path`. Finding a member reads the whole
// object (the last duplicate wins), then goes back to the member's value:
// `reread` counts the bytes read twice that way.
bool Descend(Scanner& sc, const std::vector<JsonPathStep>& path, size_t& reread) {
  sc.SkipWs();
  for (const auto& step : path) {
    if (const auto* key = std::get_if<std::string>(&step)) {
      if (!sc.Peek('{')) return false;
      ++sc.pos;
      // With duplicate keys the last one wins, as in nlohmann (and Go).
      std::optional<size_t> found;
      while (!sc.Peek('}')) {
        sc.SkipWs();
        size_t kb = sc.pos;
        if (!sc.SkipString()) return false;
        std::string k = DecodeKey(sc.Slice(kb, sc.pos));
        if (!sc.Peek(':')) return false;
        ++sc.pos;
        sc.SkipWs();
        if (k == *key) found = sc.pos;
        if (!sc.SkipValue()) return false;
        if (sc.Peek(',')) {
          ++sc.pos;
        } else if (!sc.Peek('}')) {
          return false;
        }
      }
      if (!found) return false;
      reread += sc.pos - *found;
      sc.pos = *found;
    } else {
      size_t index = std::get<size_t>(step);
      if (!sc.Peek('[')) return false;
      ++sc.pos;
      for (size_t i = 0; i < index; ++i) {
        if (sc.Peek(']')) return false;
        if (!sc.SkipValue()) return false;
        if (!sc.Peek(',')) return false;
        ++sc.pos;
      }
      if (sc.Peek(']')) return false;
    }
    sc.SkipWs();
  }
  return true;
}

}  // namespace

std::optional<std::string_view> FindRawJson(std::string_view doc, const std::vector<JsonPathStep>& path) {
  Scanner sc(doc);
  size_t reread = 0;
  if (!Descend(sc, path, reread)) return std::nullopt;
  size_t b = sc.pos;
  if (!sc.SkipValue()) return std::nullopt;
  return sc.Slice(b, sc.pos);
}

std::optional<std::vector<std::string_view>> FindRawJsonElements(std::string_view doc,
                                                                 const std::vector<JsonPathStep>& path,
                                                                 size_t* bytes_read) {
  Scanner sc(doc);
  size_t reread = 0;
  auto done = [&](auto result) {
    if (bytes_read != nullptr) *bytes_read = sc.pos + reread;
    return result;
  };
  using Out = std::optional<std::vector<std::string_view>>;
  if (!Descend(sc, path, reread) || !sc.Peek('[')) return done(Out());
  ++sc.pos;
  std::vector<std::string_view> items;
  while (!sc.Peek(']')) {
    sc.SkipWs();
    size_t b = sc.pos;
    if (!sc.SkipValue()) return done(Out());
    items.push_back(sc.Slice(b, sc.pos));
    if (sc.Peek(',')) {
      ++sc.pos;
    } else if (!sc.Peek(']')) {
      return done(Out());
    }
  }
  ++sc.pos;
  return done(Out(std::move(items)));
}

}  // namespace nvdra::kube
