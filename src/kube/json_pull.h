// A strict pull parser over JSON text, for decoders that read a document
// once, straight into typed values, without building a tree: the claim
// decoder's fast path. It accepts what nlohmann's parser accepts (RFC 8259,
// UTF-8 checked, no comments; numbers that overflow a double refused) up to
// kMaxJsonDepth levels of nesting, less a leading byte order mark (which
// nlohmann skips), so a document it reads to the end is one the tree-based
// reading takes too.
// A false from any call means "not taken": the caller stops and leaves the
// verdict (and its error message) to the tree-based reading.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace nvdra::kube {

// The kind of the value at the cursor, by its first byte.
enum class JsonToken { kEnd, kObject, kArray, kString, kNumber, kTrue, kFalse, kNull, kOther };

class JsonPull {
 public:
  explicit JsonPull(std::string_view text) : begin_(text.data()), p_(text.data()), end_(text.data() + text.size()) {}

  // Skips whitespace and names the next value's kind.
  JsonToken Next();
  // The offset of the cursor in the text.
  size_t Offset() const { return static_cast<size_t>(p_ - begin_); }
  std::string_view Slice(size_t from, size_t to) const { return {begin_ + from, to - from}; }
  // True when only whitespace is left.
  bool AtEnd();

  // A string value. `out` gets its decoded text; `raw`, when given, the
  // token with its quotes, as it stands in the text.
  bool String(std::string& out, std::string_view* raw = nullptr);
  // Any value, checked and skipped.
  bool Skip();
  bool Bool(bool& out);
  bool Null();

  // Iterates an object: ObjectBegin at its '{', then ObjectKey before each
  // member (false with `done` set at the '}'), the member's value read by
  // the caller in between. `key` points into the text or into `scratch`
  // (when the name has escapes).
  bool ObjectBegin();
  bool ObjectKey(std::string_view& key, bool& done);
  // The same for arrays: ArrayItem before each item.
  bool ArrayBegin();
  bool ArrayItem(bool& done);

 private:
  void Ws();
  bool Enter();
  bool Close();
  bool Literal(std::string_view word);
  bool Number();
  // Scans a string token from its '"': `text` gets its contents, decoded
  // into `buf` when it has escapes, else pointing into the document.
  bool StringToken(std::string_view& text, std::string& buf);
  bool Unescape(const char* from, const char* to, std::string& buf);
  bool Utf8Sequence();
  bool SkipContainer();

  const char* begin_;
  const char* p_;
  const char* end_;
  size_t depth_ = 0;
  bool first_ = false;  // the next member or item is the container's first
  std::string scratch_;
};

}  // namespace nvdra::kube
