// The one way to read JSON that comes from outside the process: API server
// answers, the kubelet, files on disk, the ledger's undo records. A
// JsonReader is a value in an nlohmann::json document plus the path to it;
// every read is typed and checked, never throws, and a failure is an
// InvalidArgument whose message starts with the path of the offending field:
//   status.allocation.devices.results[2].pool: expected a string, got a number
// Callers add what the document is with Status::Wrap ("ResourceClaim n/c has
// an unexpected shape: ...").
//
// Conventions, the same for every document:
// - A member that is absent or null is absent (the API server sends null for
//   "none"): Optional reads give nullopt, Required reads fail, ForEach visits
//   nothing.
// - A member of the wrong type is an error, never read as empty. Only ValueOr
//   falls back, for best-effort reads (an error body being reported, a
//   comparison where anything odd just compares unequal).
// - Integers are range-checked: 2^64-1 is not read as -1, 1.5 is no integer.
// - Unknown members are ignored; Unknown() collects them when a decoder must
//   write them back (records written by a newer version).
// - Depth: parse with ParseJsonText (or check util/json_depth first), so no
//   copy, comparison or dump of a value recurses past kMaxJsonDepth.
//
// The one deliberate second path is the opaque-config decoder
// (config/json_tree.h, config/config_decoder.cc). It must reproduce the
// Kubernetes strict decoder byte for byte (`strict decoding error: unknown
// field "sharing.foo", duplicate field "kind"`, `json: cannot unmarshal
// string into Go struct field ...`): it needs duplicate keys and document
// order, which nlohmann's DOM drops, collects every strict error of the
// document instead of stopping at the first, and words type errors after Go
// struct types. None of that fits a reader of already-parsed values, and no
// other input needs it.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace nvdra {

// How member names match. Exact for everything Kubernetes sends; the
// case-insensitive form mirrors Go's encoding/json for files Go wrote.
enum class JsonKeyMatch { kExact, kCaseInsensitive };

// Whether an object's `key` names `want` under `match` (kCaseInsensitive:
// ASCII case folded, as Go's encoding/json matches keys).
bool JsonKeyMatches(std::string_view key, std::string_view want, JsonKeyMatch match);

// The value at `path` as a T, or an error naming `path`. Defined for
// std::string, bool, int64_t, int, uint64_t, double, std::vector<std::string>
// and nlohmann::json (any value, unchecked).
template <typename T>
Result<T> JsonAs(const nlohmann::json& value, const std::string& path);

extern template Result<std::string> JsonAs<std::string>(const nlohmann::json&, const std::string&);
extern template Result<bool> JsonAs<bool>(const nlohmann::json&, const std::string&);
extern template Result<int64_t> JsonAs<int64_t>(const nlohmann::json&, const std::string&);
extern template Result<int> JsonAs<int>(const nlohmann::json&, const std::string&);
extern template Result<uint64_t> JsonAs<uint64_t>(const nlohmann::json&, const std::string&);
extern template Result<double> JsonAs<double>(const nlohmann::json&, const std::string&);
extern template Result<std::vector<std::string>> JsonAs<std::vector<std::string>>(const nlohmann::json&,
                                                                                  const std::string&);
extern template Result<nlohmann::json> JsonAs<nlohmann::json>(const nlohmann::json&, const std::string&);

class JsonReader {
 public:
  // `value` must outlive the reader and every reader made from it. `path`
  // is where `value` sits in its document ("" for the root).
  explicit JsonReader(const nlohmann::json& value, std::string path = "", JsonKeyMatch match = JsonKeyMatch::kExact)
      : value_(&value), path_(std::move(path)), match_(match) {}

  const nlohmann::json& value() const { return *value_; }
  const std::string& path() const { return path_; }
  bool IsNull() const { return value_->is_null(); }

  // This value as a T.
  template <typename T>
  Result<T> As() const {
    return JsonAs<T>(*value_, path_);
  }

  // Ok when this value is an object; else "<path>: expected an object, got ...".
  Status ExpectObject() const;

  // The member `key`: nullptr when absent, null, or when this is no object.
  const nlohmann::json* Find(std::string_view key) const;
  bool Has(std::string_view key) const { return Find(key) != nullptr; }
  // A reader of the member `key` (of a null value when absent).
  JsonReader Field(std::string_view key) const;

  // Member reads. Each fails when this value is not an object.
  template <typename T>
  Result<T> Required(std::string_view key) const {
    NVDRA_RETURN_IF_ERROR(ExpectObject());
    const nlohmann::json* v = Find(key);
    if (v == nullptr) return InvalidArgumentAt(ChildPath(key), "required field is missing");
    return JsonAs<T>(*v, ChildPath(key));
  }
  template <typename T>
  Result<std::optional<T>> Optional(std::string_view key) const {
    NVDRA_RETURN_IF_ERROR(ExpectObject());
    const nlohmann::json* v = Find(key);
    if (v == nullptr) return std::optional<T>();
    NVDRA_ASSIGN_OR_RETURN(T out, JsonAs<T>(*v, ChildPath(key)));
    return std::optional<T>(std::move(out));
  }
  // Optional, with `fallback` for an absent member (a wrong type still fails).
  template <typename T>
  Result<T> OptionalOr(std::string_view key, T fallback) const {
    NVDRA_ASSIGN_OR_RETURN(std::optional<T> v, Optional<T>(key));
    return v ? std::move(*v) : std::move(fallback);
  }
  // A reader of the object member `key`; nullopt when absent, an error when
  // it is not an object.
  Result<std::optional<JsonReader>> OptionalObject(std::string_view key) const;
  // Best effort: `fallback` whenever the member cannot be read as a T.
  template <typename T>
  T ValueOr(std::string_view key, T fallback) const {
    auto v = Optional<T>(key);
    return v.ok() && v->has_value() ? std::move(**v) : std::move(fallback);
  }

  // Calls `fn` with a reader of each item of the array member `key`, in
  // order, stopping at the first error. Absent: no calls; not an array: an
  // error. The item readers' paths are "<path>.<key>[<i>]".
  Status ForEach(std::string_view key, const std::function<Status(const JsonReader& item)>& fn) const;
  // The same for this value, which must be an array.
  Status ForEachItem(const std::function<Status(const JsonReader& item)>& fn) const;

  // The members whose names are not in `known`, for a lossless re-encode;
  // empty when this is no object.
  nlohmann::json Unknown(std::initializer_list<std::string_view> known) const;

  // InvalidArgument "<path>: <problem>", for checks beyond types.
  Status Invalid(std::string_view problem) const { return InvalidArgumentAt(path_, problem); }

  std::string ChildPath(std::string_view key) const;
  std::string ItemPath(size_t index) const;

 private:
  static Status InvalidArgumentAt(const std::string& path, std::string_view problem);
  bool KeyMatches(std::string_view key, std::string_view want) const;

  const nlohmann::json* value_;
  std::string path_;
  JsonKeyMatch match_;
};

// "null", "a boolean", "a number", "a string", "an array", "an object".
std::string_view JsonTypeWithArticle(const nlohmann::json& value);

// `out` with the members of `unknown` (from JsonReader::Unknown) that `out`
// does not set itself.
void MergeUnknownMembers(nlohmann::json& out, const nlohmann::json& unknown);

// Parses external JSON text without exceptions: the depth check of
// util/json_depth first, then the parse. Errors name `what`:
// "<what> is not valid JSON", "<what> nests arrays or objects deeper than ...".
Result<nlohmann::json> ParseJsonText(std::string_view text, std::string_view what);

}  // namespace nvdra
