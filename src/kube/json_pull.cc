#include "kube/json_pull.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "util/json_depth.h"

namespace nvdra::kube {
namespace {

// Bytes that end the plain run of a string: the quote, a backslash, control
// characters (refused unescaped) and the lead bytes of multi-byte UTF-8.
constexpr std::array<bool, 256> kStringStop = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 0x20; ++c) t[c] = true;
  for (int c = 0x80; c < 0x100; ++c) t[c] = true;
  t['"'] = true;
  t['\\'] = true;
  return t;
}();

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The four hex digits at `p` (which has at least four bytes), or -1.
int Hex4(const char* p) {
  int v = 0;
  for (int i = 0; i < 4; ++i) {
    int d = HexValue(p[i]);
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace

void JsonPull::Ws() {
  while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
}

bool JsonPull::AtEnd() {
  Ws();
  return p_ == end_;
}

JsonToken JsonPull::Next() {
  Ws();
  if (p_ == end_) return JsonToken::kEnd;
  switch (*p_) {
    case '{': return JsonToken::kObject;
    case '[': return JsonToken::kArray;
    case '"': return JsonToken::kString;
    case 't': return JsonToken::kTrue;
    case 'f': return JsonToken::kFalse;
    case 'n': return JsonToken::kNull;
    case '-': return JsonToken::kNumber;
    default: return IsDigit(*p_) ? JsonToken::kNumber : JsonToken::kOther;
  }
}

bool JsonPull::Literal(std::string_view word) {
  if (static_cast<size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word) return false;
  p_ += word.size();
  return true;
}

bool JsonPull::Null() { return Next() == JsonToken::kNull && Literal("null"); }

bool JsonPull::Bool(bool& out) {
  JsonToken t = Next();
  out = t == JsonToken::kTrue;
  return (t == JsonToken::kTrue && Literal("true")) || (t == JsonToken::kFalse && Literal("false"));
}

// RFC 8259's number grammar. Integers too large for 64 bits and numbers
// with a fraction or an exponent are read as doubles by nlohmann, which
// refuses one that overflows: the same check here.
bool JsonPull::Number() {
  const char* start = p_;
  if (p_ < end_ && *p_ == '-') ++p_;
  if (p_ == end_ || !IsDigit(*p_)) return false;
  if (*p_ == '0') {
    ++p_;
  } else {
    while (p_ < end_ && IsDigit(*p_)) ++p_;
  }
  bool real = false;
  if (p_ < end_ && *p_ == '.') {
    ++p_;
    if (p_ == end_ || !IsDigit(*p_)) return false;
    while (p_ < end_ && IsDigit(*p_)) ++p_;
    real = true;
  }
  if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
    ++p_;
    if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
    if (p_ == end_ || !IsDigit(*p_)) return false;
    while (p_ < end_ && IsDigit(*p_)) ++p_;
    real = true;
  }
  if (!real && p_ - start < 19) return true;
  std::string copy(start, p_);
  return std::isfinite(std::strtod(copy.c_str(), nullptr));
}

// One multi-byte UTF-8 sequence at p_, with the ranges of RFC 3629 (no
// overlong forms, no surrogates, nothing past U+10FFFF).
bool JsonPull::Utf8Sequence() {
  auto b = [&](ptrdiff_t i) { return static_cast<unsigned char>(p_[i]); };
  auto in = [](unsigned char c, unsigned lo, unsigned hi) { return c >= lo && c <= hi; };
  ptrdiff_t left = end_ - p_;
  unsigned char c = b(0);
  int n = 0;
  bool second_ok = false;
  if (in(c, 0xC2, 0xDF)) {
    n = 2;
    second_ok = left >= 2 && in(b(1), 0x80, 0xBF);
  } else if (in(c, 0xE0, 0xEF)) {
    n = 3;
    unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    second_ok = left >= 3 && in(b(1), lo, hi);
  } else if (in(c, 0xF0, 0xF4)) {
    n = 4;
    unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    second_ok = left >= 4 && in(b(1), lo, hi);
  }
  if (!second_ok) return false;
  for (int i = 2; i < n; ++i) {
    if (!in(b(i), 0x80, 0xBF)) return false;
  }
  p_ += n;
  return true;
}

// Decodes the escapes of [from, to) (a checked string's contents) into buf.
bool JsonPull::Unescape(const char* from, const char* to, std::string& buf) {
  buf.clear();
  for (const char* q = from; q < to;) {
    if (*q != '\\') {
      buf.push_back(*q++);
      continue;
    }
    char e = q[1];
    q += 2;
    switch (e) {
      case '"': buf.push_back('"'); continue;
      case '\\': buf.push_back('\\'); continue;
      case '/': buf.push_back('/'); continue;
      case 'b': buf.push_back('\b'); continue;
      case 'f': buf.push_back('\f'); continue;
      case 'n': buf.push_back('\n'); continue;
      case 'r': buf.push_back('\r'); continue;
      case 't': buf.push_back('\t'); continue;
      case 'u': break;
      default: return false;
    }
    if (to - q < 4) return false;
    int cp = Hex4(q);
    q += 4;
    if (cp < 0 || (cp >= 0xDC00 && cp <= 0xDFFF)) return false;
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      // A high surrogate is only taken with its low half right after it.
      if (to - q < 6 || q[0] != '\\' || q[1] != 'u') return false;
      int low = Hex4(q + 2);
      if (low < 0xDC00 || low > 0xDFFF) return false;
      q += 6;
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    AppendUtf8(buf, static_cast<uint32_t>(cp));
  }
  return true;
}

bool JsonPull::StringToken(std::string_view& text, std::string& buf) {
  if (p_ == end_ || *p_ != '"') return false;
  const char* start = ++p_;
  bool escaped = false;
  for (;;) {
    while (p_ < end_ && !kStringStop[static_cast<unsigned char>(*p_)]) ++p_;
    if (p_ == end_) return false;
    unsigned char c = static_cast<unsigned char>(*p_);
    if (c == '"') break;
    if (c == '\\') {
      // The escape's own checks run in Unescape; here only its extent.
      escaped = true;
      p_ += 2;
      if (p_ > end_) return false;
    } else if (c < 0x20 || !Utf8Sequence()) {
      return false;
    }
  }
  const char* stop = p_++;
  if (!escaped) {
    text = std::string_view(start, static_cast<size_t>(stop - start));
    return true;
  }
  if (!Unescape(start, stop, buf)) return false;
  text = buf;
  return true;
}

bool JsonPull::String(std::string& out, std::string_view* raw) {
  if (Next() != JsonToken::kString) return false;
  const char* start = p_;
  std::string_view text;
  if (!StringToken(text, scratch_)) return false;
  out.assign(text);
  if (raw != nullptr) *raw = std::string_view(start, static_cast<size_t>(p_ - start));
  return true;
}

bool JsonPull::Enter() {
  ++p_;
  return ++depth_ <= kMaxJsonDepth;
}

bool JsonPull::ObjectBegin() {
  if (Next() != JsonToken::kObject || !Enter()) return false;
  first_ = true;
  return true;
}

bool JsonPull::Close() {
  ++p_;
  --depth_;
  return true;
}

// The ',' before each member but the first; a '}' after a ',' is refused
// where the name should be.
bool JsonPull::ObjectKey(std::string_view& key, bool& done) {
  Ws();
  done = false;
  if (p_ == end_) return false;
  if (*p_ == '}') {
    first_ = false;
    done = true;
    return Close();
  }
  if (!first_) {
    if (*p_ != ',') return false;
    ++p_;
    Ws();
  }
  first_ = false;
  if (!StringToken(key, scratch_)) return false;
  Ws();
  if (p_ == end_ || *p_ != ':') return false;
  ++p_;
  return true;
}

bool JsonPull::ArrayBegin() {
  if (Next() != JsonToken::kArray || !Enter()) return false;
  first_ = true;
  return true;
}

// The same for items: "[1,]" is refused by the caller, which finds no
// value after the ','.
bool JsonPull::ArrayItem(bool& done) {
  Ws();
  done = false;
  if (p_ == end_) return false;
  if (*p_ == ']') {
    first_ = false;
    done = true;
    return Close();
  }
  if (!first_) {
    if (*p_ != ',') return false;
    ++p_;
  }
  first_ = false;
  return true;
}

bool JsonPull::SkipContainer() {
  bool done = false;
  if (Next() == JsonToken::kObject) {
    if (!ObjectBegin()) return false;
    std::string_view key;
    for (;;) {
      if (!ObjectKey(key, done)) return false;
      if (done) return true;
      if (!Skip()) return false;
    }
  }
  if (!ArrayBegin()) return false;
  for (;;) {
    if (!ArrayItem(done)) return false;
    if (done) return true;
    if (!Skip()) return false;
  }
}

bool JsonPull::Skip() {
  switch (Next()) {
    case JsonToken::kObject:
    case JsonToken::kArray: return SkipContainer();
    case JsonToken::kString: {
      std::string_view text;
      return StringToken(text, scratch_);
    }
    case JsonToken::kNumber: return Number();
    case JsonToken::kTrue: return Literal("true");
    case JsonToken::kFalse: return Literal("false");
    case JsonToken::kNull: return Literal("null");
    default: return false;
  }
}

}  // namespace nvdra::kube
