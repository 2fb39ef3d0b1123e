#include "config/config_decoder.h"

#include <algorithm>
#include <string>
#include <vector>

#include "config/config_kind.h"
#include "config/json_tree.h"

namespace nvdra::config {
namespace {

using Type = JsonValue::Type;

// Keeps error messages that quote the document readable.
std::string Excerpt(std::string_view json) {
  constexpr size_t kMax = 256;
  if (json.size() <= kMax) return std::string(json);
  return std::string(json.substr(0, kMax)) + "...";
}

struct TypeMeta {
  std::string api_version;
  std::string kind;
};

// The Kubernetes meta factory's first pass: find apiVersion and kind (last
// occurrence wins, as in encoding/json) before choosing a type.
Result<TypeMeta> Interpret(const JsonValue& root) {
  if (root.type != Type::kObject) {
    return InvalidArgument("couldn't get version/kind; json parse error: json: cannot unmarshal " +
                           std::string(root.TypeName()) +
                           " into Go value of type struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; "
                           "Kind string \"json:\\\"kind,omitempty\\\"\" }");
  }
  TypeMeta meta;
  for (const auto& [key, value] : root.members) {
    if (key != "apiVersion" && key != "kind") continue;
    if (value.type == Type::kNull) continue;
    if (value.type != Type::kString) {
      return InvalidArgument("couldn't get version/kind; json parse error: json: cannot unmarshal " +
                             std::string(value.TypeName()) + " into Go struct field ." + key + " of type string");
    }
    (key == "kind" ? meta.kind : meta.api_version) = value.text;
  }
  return meta;
}

// `items` joined with ", ", each once, in their first order.
std::string JoinOnce(const std::vector<std::string>& items, std::string_view quote) {
  std::vector<std::string> seen;
  std::string out;
  for (const auto& item : items) {
    if (std::find(seen.begin(), seen.end(), item) != seen.end()) continue;
    seen.push_back(item);
    out += (out.empty() ? "" : ", ") + std::string(quote) + item + std::string(quote);
  }
  return out;
}

// The error for an apiVersion/kind no registered kind has, naming what is
// registered: the apiVersions when none has this one, else the kinds of it.
Status Unregistered(const TypeMeta& meta) {
  std::vector<std::string> versions, kinds;
  for (const ConfigKind* k : RegisteredConfigKinds()) {
    versions.push_back(k->api_version);
    if (k->api_version == meta.api_version) kinds.push_back(k->kind);
  }
  std::string msg = "no kind \"" + meta.kind + "\" is registered for version \"" + meta.api_version + "\"; ";
  if (versions.empty()) return InvalidArgument(msg + "no config kinds are registered");
  if (kinds.empty())
    return InvalidArgument(msg + "opaque configs of this driver use apiVersion " + JoinOnce(versions, "\""));
  return InvalidArgument(msg + "known kinds: " + JoinOnce(kinds, ""));
}

Result<Config> Decode(std::string_view json, bool strict) {
  JsonParseLimits limits;
  if (!strict) limits.max_bytes = 64 << 20;  // our own records: never refuse on size
  auto parsed = ParseJson(json, limits);
  if (!parsed.ok()) {
    return InvalidArgument("couldn't get version/kind; " + parsed.status().message());
  }
  const JsonValue& root = *parsed;
  NVDRA_ASSIGN_OR_RETURN(TypeMeta meta, Interpret(root));
  if (std::count(meta.api_version.begin(), meta.api_version.end(), '/') > 1) {
    return InvalidArgument("unexpected GroupVersion string: " + meta.api_version);
  }
  if (meta.kind.empty()) return InvalidArgument("Object 'Kind' is missing in '" + Excerpt(json) + "'");
  if (meta.api_version.empty()) return InvalidArgument("Object 'apiVersion' is missing in '" + Excerpt(json) + "'");
  const ConfigKind* kind = FindConfigKind(meta.api_version, meta.kind);
  if (kind == nullptr) return Unregistered(meta);

  ConfigWalker w(strict);
  Config config = kind->decode(w, root);
  if (strict) NVDRA_RETURN_IF_ERROR(w.Finish());
  return config;
}

}  // namespace

Result<Config> DecodeStrict(std::string_view json) { return Decode(json, /*strict=*/true); }

Result<Config> DecodeLenient(std::string_view json) { return Decode(json, /*strict=*/false); }

}  // namespace nvdra::config
