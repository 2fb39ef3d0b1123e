#include "kubelet/device_list.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace nvdra::kubelet {

std::string BaseRequestName(std::string_view request_name) {
  return std::string(request_name.substr(0, request_name.find('/')));
}

std::vector<PreparedDevice> NormalizeDevices(std::vector<PreparedDevice> devices, bool keep_share_id) {
  using Key = std::tuple<std::string, std::string, std::string>;
  std::map<Key, PreparedDevice> merged;
  for (auto& d : devices) {
    if (!keep_share_id) d.share_id.clear();
    Key key{d.pool, d.device, d.share_id};
    auto [it, inserted] = merged.try_emplace(key);
    PreparedDevice& out = it->second;
    if (inserted) {
      out.pool = d.pool;
      out.device = d.device;
      out.share_id = d.share_id;
    }
    for (const auto& r : d.requests) out.requests.push_back(BaseRequestName(r));
    for (auto& id : d.cdi_device_ids) {
      if (std::find(out.cdi_device_ids.begin(), out.cdi_device_ids.end(), id) == out.cdi_device_ids.end()) {
        out.cdi_device_ids.push_back(std::move(id));
      }
    }
  }
  std::vector<PreparedDevice> result;
  result.reserve(merged.size());
  for (auto& [key, d] : merged) {
    std::set<std::string> names(d.requests.begin(), d.requests.end());
    d.requests.assign(names.begin(), names.end());
    result.push_back(std::move(d));
  }
  return result;
}

}  // namespace nvdra::kubelet
