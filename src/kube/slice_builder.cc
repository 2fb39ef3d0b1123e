#include "kube/slice_builder.h"

#include <algorithm>
#include <cstdio>

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

std::vector<SliceContent> ChunkSlices(std::vector<model::PublishedDevice> devices, bool counters_in_own_slice) {
  std::vector<SliceContent> out;
  bool partitionable = std::any_of(devices.begin(), devices.end(),
                                   [](const auto& d) { return !d.consumes_counters.empty(); });
  if (!partitionable) {
    for (auto& chunk : ChunkDevices(std::move(devices))) out.push_back({{}, std::move(chunk)});
    return out;
  }
  std::sort(devices.begin(), devices.end(), [](const auto& a, const auto& b) {
    return a.sort_key != b.sort_key ? a.sort_key < b.sort_key : a.name < b.name;
  });
  SliceContent all_sets;
  for (auto& d : devices) {
    if (out.empty() || out.back().devices.front().sort_key != d.sort_key) out.emplace_back();
    SliceContent& slice = counters_in_own_slice ? all_sets : out.back();
    for (auto& set : d.counter_sets) {
      auto same = [&](const model::CounterSet& c) { return c.name == set.name; };
      if (std::none_of(slice.counter_sets.begin(), slice.counter_sets.end(), same)) slice.counter_sets.push_back(set);
    }
    d.counter_sets.clear();
    out.back().devices.push_back(std::move(d));
  }
  if (counters_in_own_slice) out.insert(out.begin(), std::move(all_sets));
  return out;
}

bool CounterSetsInOwnSlice(const std::string& git_version) {
  int major = 0, minor = 0;
  if (std::sscanf(git_version.c_str(), "v%d.%d", &major, &minor) != 2) return false;
  return major > 1 || (major == 1 && minor >= 35);
}

namespace {
json Quantities(const std::map<std::string, std::string>& m) {
  json out = json::object();
  for (const auto& [k, v] : m) out[k] = {{"value", v}};
  return out;
}
}  // namespace

json EncodeDevice(const model::PublishedDevice& d, const std::string& api_version) {
  json fields = json::object();
  if (!d.attributes.empty()) {
    json attrs = json::object();
    for (const auto& [k, v] : d.attributes) {
      json a;
      if (const auto* s = std::get_if<std::string>(&v)) a["string"] = *s;
      else if (const auto* i = std::get_if<int64_t>(&v)) a["int"] = *i;
      else if (const auto* b = std::get_if<bool>(&v)) a["bool"] = *b;
      else if (const auto* l = std::get_if<model::IntList>(&v)) a["ints"] = l->values;
      else a["version"] = std::get<model::Version>(v).value;
      attrs[k] = std::move(a);
    }
    fields["attributes"] = std::move(attrs);
  }
  if (!d.capacity.empty()) {
    json cap = json::object();
    for (const auto& [k, v] : d.capacity) {
      cap[k] = {{"value", v}};
      if (auto p = d.capacity_policies.find(k); p != d.capacity_policies.end())
        cap[k]["requestPolicy"] = Encode(p->second);
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
  if (!d.consumes_counters.empty()) {
    json consumes = json::array();
    for (const auto& c : d.consumes_counters) {
      consumes.push_back({{"counterSet", c.counter_set}, {"counters", Quantities(c.counters)}});
    }
    fields["consumesCounters"] = std::move(consumes);
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

json BuildSliceSpec(const std::string& driver, const std::string& node, const PoolRef& pool,
                    const SliceContent& content, const std::string& api_version) {
  json spec = BuildSliceSpec(driver, node, pool, content.devices, api_version);
  if (content.counter_sets.empty()) return spec;
  json sets = json::array();
  for (const auto& c : content.counter_sets) sets.push_back({{"name", c.name}, {"counters", Quantities(c.counters)}});
  spec["sharedCounters"] = std::move(sets);
  if (content.devices.empty()) spec.erase("devices");
  return spec;
}

}  // namespace nvdra::kube
