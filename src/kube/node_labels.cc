#include "kube/node_labels.h"

#include "util/json_reader.h"
#include "util/parse_number.h"

namespace nvdra::kube {

using nlohmann::json;

std::optional<std::string> NodeLabel(const json& node, const std::string& key) {
  // A Node of any odd shape simply has no such label.
  auto label = JsonReader(node).Field("metadata").Field("labels").Optional<std::string>(key);
  return label.ok() ? *label : std::nullopt;
}

std::string ResourceVersionOf(const json& object) {
  return JsonReader(object).Field("metadata").ValueOr<std::string>("resourceVersion", "");
}

bool ResourceVersionNotOlder(std::string_view rv, std::string_view than) {
  if (rv == than) return true;
  auto a = ParseUint64(rv);
  auto b = ParseUint64(than);
  return a.ok() && b.ok() && *a >= *b;
}

namespace {

std::string Str(const JsonReader& r, const char* key) { return r.ValueOr<std::string>(key, ""); }

// Whether `node` is a copy of Node `name` a write can be decided on: of kind
// Node (a LIST item may omit the kind), with that name and a resourceVersion
// the patch can be conditional on.
bool UsableCopy(const json& node, const std::string& name) {
  if (!node.is_object()) return false;
  JsonReader r(node);
  std::string kind = Str(r, "kind");
  JsonReader meta = r.Field("metadata");
  return (kind.empty() || kind == "Node") && Str(meta, "name") == name && !ResourceVersionOf(node).empty();
}

Result<json> ReadNode(KubeClient& client, const std::string& path, const std::string& name) {
  NVDRA_ASSIGN_OR_RETURN(json node, client.GetJson(path));
  if (!UsableCopy(node, name)) {
    return Internal("GET " + path + " answered something other than Node " + name +
                    " with a resourceVersion; not changing its labels");
  }
  return node;
}

}  // namespace

Result<NodeLabelUpdate> UpdateNodeLabel(KubeClient& client, const std::string& node_name, const std::string& key,
                                        const LabelRule& rule, const json* cached, int max_attempts) {
  const std::string path = "/api/v1/nodes/" + node_name;
  NodeLabelUpdate out;
  if (cached != nullptr && UsableCopy(*cached, node_name)) {
    out.node = *cached;
  } else {
    ++out.requests;
    NVDRA_ASSIGN_OR_RETURN(out.node, ReadNode(client, path, node_name));
  }
  for (int attempt = 1;; ++attempt) {
    auto current = NodeLabel(out.node, key);
    NVDRA_ASSIGN_OR_RETURN(std::optional<std::string> want, rule(current));
    if (want == current) return out;
    // Only this label changes, and only if the Node is still the one the
    // rule decided on: the patch carries its resourceVersion.
    json patch = {
        {"metadata",
         {{"resourceVersion", ResourceVersionOf(out.node)}, {"labels", {{key, want ? json(*want) : json(nullptr)}}}}}};
    ++out.requests;
    auto r = client.MergePatchJson(path, patch);
    if (r.ok()) {
      out.node = std::move(*r);
      out.written = true;
      return out;
    }
    if (r.status().code() != StatusCode::kConflict)
      return r.status().Wrap("update label " + key + " of Node " + node_name);
    if (attempt >= max_attempts) {
      return r.status().Wrap("update label " + key + " of Node " + node_name + " (still conflicting after " +
                             std::to_string(attempt) + " attempts)");
    }
    // Someone else wrote the Node since our copy: decide again on theirs.
    ++out.requests;
    NVDRA_ASSIGN_OR_RETURN(out.node, ReadNode(client, path, node_name));
  }
}

}  // namespace nvdra::kube
