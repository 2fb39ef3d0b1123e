#include "driver/claim_metadata.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "util/file_util.h"

namespace nvdra::driver {

Status ClaimMetadata::Write(const ClaimSnapshot& snap, const std::vector<model::AllocationResult>& results,
                            std::vector<model::PreparedDevice>* devices) const {
  if (files_ == nullptr) return Status::Ok();
  MetadataClaim claim{snap.uid, snap.ns, snap.name, snap.pod_claim_name};
  // Requests in the order of their first result, with their devices.
  std::vector<std::pair<std::string, std::vector<MetadataDevice>>> requests;
  for (const auto& r : results) {
    auto it = std::find_if(requests.begin(), requests.end(), [&](const auto& q) { return q.first == r.request; });
    if (it == requests.end()) it = requests.insert(requests.end(), {r.request, {}});
    it->second.push_back({r.pool, r.device, kind_.MetadataAttributes(r.device)});
  }
  for (const auto& [request, devs] : requests) {
    auto id = files_->Write(claim, request, devs);
    if (!id.ok()) return id.status().Wrap("unable to write device metadata for request " + request);
    if (devices == nullptr) continue;
    // As upstream: the id goes to the request's first device only; one
    // mount per container is enough.
    const std::string base = BaseRequest(request);
    for (size_t i = 0; i < results.size() && i < devices->size(); ++i) {
      if (BaseRequest(results[i].request) != base) continue;
      auto& ids = (*devices)[i].cdi_device_ids;
      if (std::find(ids.begin(), ids.end(), *id) == ids.end()) ids.push_back(*id);
      break;
    }
  }
  return Status::Ok();
}

bool ClaimMetadata::Recorded(const ledger::ClaimEntry& entry) const {
  if (files_ == nullptr) return false;
  return std::any_of(entry.prepared.begin(), entry.prepared.end(), [this](const model::PreparedDevice& d) {
    return std::any_of(d.cdi_device_ids.begin(), d.cdi_device_ids.end(),
                       [this](const std::string& id) { return files_->IsDeviceId(id); });
  });
}

bool ClaimMetadata::Present(const ledger::ClaimEntry& entry) const {
  if (files_ == nullptr) return true;
  const std::string kind_prefix = files_->driver() + "/metadata=" + entry.uid + "_";
  for (const auto& d : entry.prepared) {
    for (const auto& id : d.cdi_device_ids) {
      if (id.rfind(kind_prefix, 0) != 0) continue;
      const std::string base = id.substr(kind_prefix.size());
      if (!PathExists(files_->SpecPath(entry.uid, base)) || !PathExists(files_->FilePath(entry.ns, entry.name, base))) {
        return false;
      }
    }
  }
  return true;
}

Status ClaimMetadata::Remove(const ledger::ClaimEntry& entry) const {
  if (files_ == nullptr) return Status::Ok();
  // An entry rebuilt from a CDI spec or imported from the Go driver's
  // checkpoint may lack its name or allocation: then the directories are
  // searched for the claim's UID.
  if (entry.name.empty() || entry.allocation.empty()) {
    return files_->RemoveAllOf(entry.uid).Wrap("remove device metadata");
  }
  std::set<std::string> bases;
  for (const auto& a : entry.allocation) bases.insert(BaseRequest(a.request));
  for (const auto& d : entry.prepared) {
    for (const auto& r : d.requests) bases.insert(BaseRequest(r));
  }
  return files_->Remove(entry.uid, entry.ns, entry.name, bases).Wrap("remove device metadata");
}

}  // namespace nvdra::driver
