#include "kube/slice_builder.h"

#include <algorithm>

namespace nvdra::kube {

using nlohmann::json;

namespace {

// The same shape in v1, v1beta2 and v1beta1 (DeviceCapacity.requestPolicy).
json Encode(const model::CapacityRequestPolicy& p) {
  json range = {{"min", p.min}};
  if (!p.max.empty()) range["max"] = p.max;
  if (!p.step.empty()) range["step"] = p.step;
  return {{"default", p.default_value}, {"validRange", std::move(range)}};
}

}  // namespace

std::vector<std::vector<model::PublishedDevice>> ChunkDevices(std::vector<model::PublishedDevice> devices) {
  std::sort(devices.begin(), devices.end(), [](const auto& a, const auto& b) {
    return a.sort_key != b.sort_key ? a.sort_key < b.sort_key : a.name < b.name;
  });
  bool tainted = std::any_of(devices.begin(), devices.end(), [](const auto& d) { return !d.taints.empty(); });
  size_t per = tainted ? kMaxDevicesPerSliceWithTaints : kMaxDevicesPerSlice;
  std::vector<std::vector<model::PublishedDevice>> out;
  for (size_t i = 0; i < devices.size(); i += per) {
    size_t end = std::min(devices.size(), i + per);
    out.emplace_back(std::make_move_iterator(devices.begin() + i), std::make_move_iterator(devices.begin() + end));
  }
  return out;
}

json EncodeDevice(const model::PublishedDevice& d, const std::string& api_version) {
  json fields = json::object();
  if (!d.attributes.empty()) {
    json attrs = json::object();
    for (const auto& [k, v] : d.attributes) {
      json a;
      if (const auto* s = std::get_if<std::string>(&v)) a["string"] = *s;
      else if (const auto* i = std::get_if<int64_t>(&v)) a["int"] = *i;
      else if (const auto* b = std::get_if<bool>(&v)) a["bool"] = *b;
      else a["version"] = std::get<model::Version>(v).value;
      attrs[k] = std::move(a);
    }
    fields["attributes"] = std::move(attrs);
  }
  if (!d.capacity.empty()) {
    json cap = json::object();
    for (const auto& [k, v] : d.capacity) {
      cap[k] = {{"value", v}};
      if (auto p = d.capacity_policies.find(k); p != d.capacity_policies.end()) cap[k]["requestPolicy"] = Encode(p->second);
    }
    fields["capacity"] = std::move(cap);
  }
  if (d.allow_multiple_allocations) fields["allowMultipleAllocations"] = true;
  if (!d.taints.empty()) {
    json taints = json::array();
    for (const auto& t : d.taints) {
      json tj = {{"key", t.key}, {"effect", t.effect}};
      if (!t.value.empty()) tj["value"] = t.value;
      taints.push_back(std::move(tj));
    }
    fields["taints"] = std::move(taints);
  }
  if (api_version == "v1beta1") return {{"name", d.name}, {"basic", std::move(fields)}};
  fields["name"] = d.name;
  return fields;
}

json BuildSliceSpec(const std::string& driver, const std::string& node, const PoolRef& pool,
                    const std::vector<model::PublishedDevice>& devices, const std::string& api_version) {
  json devs = json::array();
  for (const auto& d : devices) devs.push_back(EncodeDevice(d, api_version));
  return {
      {"driver", driver},
      {"nodeName", node},
      {"pool", {{"name", pool.name}, {"generation", pool.generation}, {"resourceSliceCount", pool.slice_count}}},
      {"devices", std::move(devs)},
  };
}

}  // namespace nvdra::kube
