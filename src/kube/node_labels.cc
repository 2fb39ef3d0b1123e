#include "kube/node_labels.h"

#include "util/json_reader.h"

namespace nvdra::kube {

using nlohmann::json;

std::optional<std::string> NodeLabel(const json& node, const std::string& key) {
  // A Node of any odd shape simply has no such label.
  auto label = JsonReader(node).Field("metadata").Field("labels").Optional<std::string>(key);
  return label.ok() ? *label : std::nullopt;
}

Result<NodeLabelUpdate> UpdateNodeLabel(KubeClient& client, const std::string& node_name, const std::string& key,
                                        const LabelRule& rule, const json* cached, int max_attempts) {
  const std::string path = "/api/v1/nodes/" + node_name;
  NodeLabelUpdate out;
  if (cached != nullptr && cached->is_object()) {
    out.node = *cached;
  } else {
    ++out.requests;
    NVDRA_ASSIGN_OR_RETURN(out.node, client.GetJson(path));
  }
  for (int attempt = 1;; ++attempt) {
    auto current = NodeLabel(out.node, key);
    NVDRA_ASSIGN_OR_RETURN(std::optional<std::string> want, rule(current));
    if (want == current) return out;
    json updated = out.node;
    if (!updated["metadata"].contains("labels") || !updated["metadata"]["labels"].is_object()) {
      updated["metadata"]["labels"] = json::object();
    }
    if (want) {
      updated["metadata"]["labels"][key] = *want;
    } else {
      updated["metadata"]["labels"].erase(key);
    }
    ++out.requests;
    auto r = client.UpdateJson(path, updated);
    if (r.ok()) {
      out.node = std::move(*r);
      out.written = true;
      return out;
    }
    if (r.status().code() != StatusCode::kConflict) return r.status().Wrap("update label " + key + " of Node " + node_name);
    if (attempt >= max_attempts) {
      return r.status().Wrap("update label " + key + " of Node " + node_name + " (still conflicting after " +
                             std::to_string(attempt) + " attempts)");
    }
    // Someone else wrote the Node since our copy: decide again on theirs.
    ++out.requests;
    NVDRA_ASSIGN_OR_RETURN(out.node, client.GetJson(path));
  }
}

}  // namespace nvdra::kube
