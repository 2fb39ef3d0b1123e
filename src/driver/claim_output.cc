#include "driver/claim_output.h"

#include <set>
#include <utility>

namespace nvdra::driver {

ClaimOutput BuildClaimOutput(const cdi::CdiSpecWriter& cdi, const std::string& claim_uid,
                             const std::vector<model::AllocationResult>& results, ClaimEdits edits,
                             const std::string& claim_namespace, const std::string& claim_name) {
  ClaimOutput out;
  std::vector<cdi::SpecDevice> devs;
  devs.reserve(edits.devices.size());
  std::set<std::string> with_edits;
  for (auto& d : edits.devices) {
    with_edits.insert(d.device);
    devs.push_back({std::move(d.device), std::move(d.edits)});
  }
  out.spec = cdi.BuildClaimSpec(claim_uid, std::move(devs), std::move(edits.common), claim_namespace, claim_name);
  out.spec.shared_edits = std::move(edits.shared_common);
  for (const auto& r : results) {
    model::PreparedDevice d;
    d.requests = {r.request};
    d.pool = r.pool;
    d.device = r.device;
    if (with_edits.count(r.device)) d.cdi_device_ids = {cdi.DeviceId(claim_uid, r.device)};
    if (auto shared = edits.shared_cdi_ids.find(r.device); shared != edits.shared_cdi_ids.end()) {
      d.cdi_device_ids.insert(d.cdi_device_ids.end(), shared->second.begin(), shared->second.end());
    }
    d.share_id = r.share_id;
    out.devices.push_back(std::move(d));
  }
  return out;
}

}  // namespace nvdra::driver
