// One label of a Node, changed with optimistic concurrency: the write is a
// merge patch of that one label (never a PUT of a copy, so nothing else of the
// Node can be lost, whatever the copy held) carrying the resourceVersion it
// was decided on, and a 409 Conflict re-reads the Node and decides again.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "kube/kube_client.h"
#include "util/status.h"

namespace nvdra::kube {

// Decides the label's value from its current one (nullopt: absent). Returns
// the wanted value (nullopt: remove), or an error that stops the update.
using LabelRule = std::function<Result<std::optional<std::string>>(const std::optional<std::string>& current)>;

struct NodeLabelUpdate {
  bool written = false;  // a PATCH changed the Node
  int requests = 0;      // API calls made (GETs and PATCHes)
  nlohmann::json node;   // the Node as last read or written
};

// The value of label `key` of `node` (a Node object), nullopt when absent.
std::optional<std::string> NodeLabel(const nlohmann::json& node, const std::string& key);

// metadata.resourceVersion of `object`, "" when absent or not a string.
std::string ResourceVersionOf(const nlohmann::json& object);

// Whether a copy at resourceVersion `rv` is known to be at least as new as
// one at `than`: the API server's resourceVersions are decimal integers that
// grow with every write; any other text (or a number beyond 64 bits) is only
// known to be as new when equal.
bool ResourceVersionNotOlder(std::string_view rv, std::string_view than);

// Applies `rule` to label `key` of Node `node_name`. Starts from `cached` (a
// recent copy, e.g. from a watch) when given and it is Node `node_name` with
// a resourceVersion, else GETs the Node; a stale copy only costs one 409 and
// a GET. Gives up after `max_attempts` writes.
Result<NodeLabelUpdate> UpdateNodeLabel(KubeClient& client, const std::string& node_name, const std::string& key,
                                        const LabelRule& rule, const nlohmann::json* cached = nullptr,
                                        int max_attempts = 5);

}  // namespace nvdra::kube
