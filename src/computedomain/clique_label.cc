#include "computedomain/clique_label.h"

namespace nvdra::computedomain {

namespace {

bool Marked(const nlohmann::json& node) {
  auto m = node.find("metadata");
  if (m == node.end() || !m->is_object()) return false;
  auto a = m->find("annotations");
  return a != m->end() && a->is_object() && a->contains(kGpuCliqueLabelOwner);
}

std::string NameOf(const nlohmann::json& node) {
  auto m = node.find("metadata");
  if (m == node.end() || !m->is_object()) return "";
  auto n = m->find("name");
  return n != m->end() && n->is_string() ? n->get<std::string>() : "";
}

}  // namespace

Result<bool> RemoveOwnedCliqueLabel(kube::KubeClient& client, const nlohmann::json& node) {
  if (!Marked(node)) return false;
  const std::string name = NameOf(node);
  if (name.empty()) return InvalidArgument("a Node without metadata.name");
  nlohmann::json patch = {
      {"metadata", {{"labels", {{kGpuCliqueLabel, nullptr}}}, {"annotations", {{kGpuCliqueLabelOwner, nullptr}}}}}};
  NVDRA_RETURN_IF_ERROR(client.MergePatchJson("/api/v1/nodes/" + name, patch).status());
  return true;
}

Result<bool> RemoveOwnedCliqueLabel(kube::KubeClient& client, const std::string& node_name) {
  NVDRA_ASSIGN_OR_RETURN(nlohmann::json node, client.GetJson("/api/v1/nodes/" + node_name));
  return RemoveOwnedCliqueLabel(client, node);
}

Result<std::vector<std::string>> RemoveOwnedCliqueLabels(kube::KubeClient& client) {
  NVDRA_ASSIGN_OR_RETURN(nlohmann::json list, client.ListJson("/api/v1/nodes", kGpuCliqueLabel));
  std::vector<std::string> removed;
  std::string failed;
  auto items = list.find("items");
  if (items == list.end() || !items->is_array()) return removed;
  for (const auto& node : *items) {
    auto r = RemoveOwnedCliqueLabel(client, node);
    if (!r.ok()) {
      failed += (failed.empty() ? "" : "; ") + NameOf(node) + ": " + r.status().ToString();
    } else if (*r) {
      removed.push_back(NameOf(node));
    }
  }
  if (!failed.empty()) return Unavailable("remove the " + std::string(kGpuCliqueLabel) + " label: " + failed);
  return removed;
}

}  // namespace nvdra::computedomain
