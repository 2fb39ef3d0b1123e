// The toolkit config kinds decode with (config/config_kind.h): a walk over a
// parsed JSON document (config/json_tree.h) against a kind's schema, with the
// behaviour of the Kubernetes JSON serializer that upstream uses: keys are
// case-sensitive, the first type error is fatal and names the Go field and
// type, and in strict mode unknown and duplicate fields are collected with
// their path, e.g.
//   strict decoding error: unknown field "sharing.foo", duplicate field "kind"
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "config/json_tree.h"
#include "config/quantity.h"
#include "util/status.h"

namespace nvdra::config {

// Walks a JsonValue against the schema of one config kind, collecting errors
// the way sigs.k8s.io/json does: the first type error is fatal (reported
// alone), strict errors are collected in document order, de-duplicated and
// capped at 100.
class ConfigWalker {
 public:
  explicit ConfigWalker(bool strict) : strict_(strict) {}

  struct Field {
    std::string_view name;
    std::function<void(const JsonValue&)> decode;
  };

  // Decodes the members of an object into the given fields. `go_struct` is the
  // Go type name, used in type errors to match upstream's wording.
  void Struct(const JsonValue& v, std::string_view go_struct, const std::vector<Field>& fields) {
    std::vector<bool> seen(fields.size(), false);
    for (const auto& [key, value] : v.members) {
      size_t i = 0;
      while (i < fields.size() && fields[i].name != key) ++i;
      if (i == fields.size()) {
        StrictError("unknown field", key);
        continue;
      }
      if (seen[i]) StrictError("duplicate field", key);
      seen[i] = true;
      Push(key, go_struct);
      fields[i].decode(value);
      Pop();
    }
  }

  // Members of a map-typed field (string keys).
  void Map(const JsonValue& v, const std::function<void(const std::string&, const JsonValue&)>& decode) {
    std::set<std::string> seen;
    for (const auto& [key, value] : v.members) {
      if (!seen.insert(key).second) StrictError("duplicate field", key);
      Push(key, struct_stack_.empty() ? "" : struct_stack_.back());
      decode(key, value);
      Pop();
    }
  }

  // Reports that `v` cannot be stored in a field of Go type `go_type`.
  // Returns false so callers can `return TypeError(...)`.
  bool TypeError(const JsonValue& v, std::string_view go_type) {
    if (fatal_) return false;
    std::string what(v.TypeName());
    if (v.type == JsonValue::Type::kNumber && go_type == "int") what = "number " + v.text;
    std::string field;
    for (const auto& p : path_) field += (field.empty() ? "" : ".") + p;
    fatal_ = "json: cannot unmarshal " + what + " into Go struct field " +
             (struct_stack_.empty() ? std::string() : struct_stack_.back()) + "." + field + " of type " +
             std::string(go_type);
    return false;
  }

  void Fatal(std::string message) {
    if (!fatal_) fatal_ = std::move(message);
  }

  std::string Path() const {
    std::string out;
    for (const auto& p : path_) out += (out.empty() ? "" : ".") + p;
    return out;
  }

  bool strict() const { return strict_; }
  bool failed() const { return fatal_.has_value(); }

  Status Finish() const {
    if (fatal_) return InvalidArgument(*fatal_);
    if (strict_errors_.empty()) return Status::Ok();
    std::string msg = "strict decoding error: ";
    for (size_t i = 0; i < strict_errors_.size(); ++i) msg += (i ? ", " : "") + strict_errors_[i];
    return InvalidArgument(msg);
  }

 private:
  void Push(const std::string& key, std::string_view go_struct) {
    path_.push_back(key);
    struct_stack_.emplace_back(go_struct);
  }
  void Pop() {
    path_.pop_back();
    struct_stack_.pop_back();
  }

  void StrictError(std::string_view type, const std::string& key) {
    if (!strict_) return;
    std::string path = Path();
    path += (path.empty() ? "" : ".") + key;
    std::string err = std::string(type) + " \"" + path + "\"";
    if (strict_errors_.size() >= 100 || !seen_errors_.insert(err).second) return;
    strict_errors_.push_back(std::move(err));
  }

  bool strict_;
  std::vector<std::string> path_;
  std::vector<std::string> struct_stack_;
  std::vector<std::string> strict_errors_;
  std::set<std::string> seen_errors_;
  std::optional<std::string> fatal_;
};

// Field decoders for ConfigWalker::Struct. JSON null leaves a Go value
// untouched (or clears a pointer), which is what each of these does for null.
namespace fields {

// A string field; `go_type` is the field's Go type for type errors.
void String(ConfigWalker& w, const JsonValue& v, std::string& out, std::string_view go_type = "string");
void OptString(ConfigWalker& w, const JsonValue& v, std::optional<std::string>& out, std::string_view go_type);
// A Go int: an integer within int64.
void OptInt(ConfigWalker& w, const JsonValue& v, std::optional<int64_t>& out);
void OptBool(ConfigWalker& w, const JsonValue& v, std::optional<bool>& out);
// A resource.Quantity: a JSON string or a bare number; in strict mode a bad
// one is fatal and names the field.
std::optional<Quantity> ParseQuantityValue(ConfigWalker& w, const JsonValue& v);
void OptQuantity(ConfigWalker& w, const JsonValue& v, std::optional<Quantity>& out);
// True for an object; a type error for anything else but null.
bool ExpectObject(ConfigWalker& w, const JsonValue& v, std::string_view go_type);
// The apiVersion and kind members of a config's root, which select the kind
// before decoding and are only checked for their type here.
std::vector<ConfigWalker::Field> TypeMetaFields(ConfigWalker& w);

}  // namespace fields
}  // namespace nvdra::config
