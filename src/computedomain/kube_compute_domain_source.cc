#include "computedomain/kube_compute_domain_source.h"

namespace nvdra::computedomain {

namespace {

// Typed look-ups: value() throws on null or on a field of another type, and
// a ComputeDomain whose status is null or half-written must read as "not
// ready", not crash the plugin inside a kubelet call.
const nlohmann::json* Member(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string StringMember(const nlohmann::json& j, const char* key) {
  const nlohmann::json* v = Member(j, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : "";
}

}  // namespace

Result<ComputeDomainInfo> KubeComputeDomainSource::Get(const std::string& domain_uid) {
  auto list = client_.ListJson("/apis/resource.nvidia.com/v1beta1/computedomains");
  if (!list.ok()) return list.status().Wrap("list ComputeDomains");
  const nlohmann::json* items = Member(*list, "items");
  if (items == nullptr || !items->is_array()) return Unavailable("list ComputeDomains: response has no items");
  for (const auto& cd : *items) {
    const nlohmann::json* md = Member(cd, "metadata");
    if (md == nullptr || StringMember(*md, "uid") != domain_uid) continue;
    ComputeDomainInfo info;
    info.uid = domain_uid;
    info.ns = StringMember(*md, "namespace");
    info.name = StringMember(*md, "name");
    const nlohmann::json* status = Member(cd, "status");
    const nlohmann::json* nodes = status != nullptr ? Member(*status, "nodes") : nullptr;
    if (nodes != nullptr && nodes->is_array()) {
      for (const auto& n : *nodes) {
        if (StringMember(n, "name") == node_ && StringMember(n, "status") == "Ready") info.node_ready = true;
      }
    }
    return info;
  }
  return NotFound("ComputeDomain not found: " + domain_uid);
}

}  // namespace nvdra::computedomain
