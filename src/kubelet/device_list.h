// Turns what an engine reports for one claim into what the kubelet gets:
// request names without subrequest suffixes, no duplicates, a stable order.
// The kubelet compares results across retries, so the order must not depend
// on thread timing or map iteration.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kubelet/claim_engine.h"

namespace nvdra::kubelet {

// "req/sub" -> "req"; "req" stays "req".
std::string BaseRequestName(std::string_view request_name);

// Strips subrequest suffixes, drops share_id unless `keep_share_id` (v1beta1
// has no such field), merges entries naming the same (pool, device, share_id):
// their request names become one sorted set, their CDI IDs keep first-seen
// order without repeats. The result is sorted by (pool, device, share_id).
std::vector<PreparedDevice> NormalizeDevices(std::vector<PreparedDevice> devices, bool keep_share_id);

}  // namespace nvdra::kubelet
