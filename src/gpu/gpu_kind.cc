#include "gpu/gpu_kind.h"

#include <algorithm>
#include <set>

#include "devices/published_devices.h"
#include "metrics/dra_metrics.h"
#include "util/log.h"

namespace nvdra::gpu {

namespace {
constexpr int kUndoVersion = 1;
}

GpuKind::GpuKind(devices::NodeInventory inventory, devices::DeviceEdits edits, devices::GpuControl& control,
                 const cdi::CdiSpecWriter& cdi)
    : inventory_(std::move(inventory)), edits_(std::move(edits)), control_(control), cdi_(cdi) {
  for (const auto& g : inventory_.gpus) {
    if (!g.mig_enabled) by_name_[devices::GpuDeviceName(g.minor)] = Located{&g, nullptr};
    for (const auto& m : g.migs) by_name_[devices::MigDeviceName(m)] = Located{&g, &m};
  }
}

const GpuKind::Located* GpuKind::Find(const std::string& device) const {
  auto it = by_name_.find(device);
  return it == by_name_.end() ? nullptr : &it->second;
}

std::string GpuKind::DeviceType(const std::string& device) const {
  const Located* l = Find(device);
  if (l == nullptr) return "";
  return l->mig != nullptr ? "mig" : "gpu";
}

std::vector<std::string> GpuKind::MetricDeviceTypes() const { return metrics::kGpuDeviceTypes; }

std::vector<model::PublishedDevice> GpuKind::PublishedDevices() const {
  return taints_.Decorate(devices::GpuPublishedDevices(inventory_));
}

Result<driver::ClaimPlan> GpuKind::Plan(const driver::ClaimWork& work) {
  driver::ClaimPlan plan;
  nlohmann::json time_slicing = nlohmann::json::array();
  for (const auto& group : work.groups) {
    if (const auto* gc = std::get_if<config::GpuConfig>(&group.config)) {
      if (gc->IsMps()) return FailedPrecondition("MPS sharing is not supported yet by nvdra");
      if (!gc->IsTimeSlicing()) continue;
      auto interval = gc->TimeSlice();
      if (!interval) continue;
      for (const auto& r : group.results) {
        const Located* l = Find(r.device);
        if (l == nullptr || l->mig != nullptr) continue;
        time_slicing.push_back({{"device", r.device}, {"uuid", l->gpu->uuid}, {"interval", static_cast<int>(*interval)}});
      }
    } else if (const auto* mc = std::get_if<config::MigDeviceConfig>(&group.config)) {
      if (mc->IsMps()) return FailedPrecondition("MPS sharing is not supported yet by nvdra");
    }
  }
  std::set<std::string> names;
  for (const auto& r : work.results) names.insert(r.device);
  plan.undo = {{"version", kUndoVersion},
               {"devices", std::vector<std::string>(names.begin(), names.end())},
               {"timeSlicing", time_slicing}};
  return plan;
}

Result<cdi::Spec> GpuKind::BuildSpec(const std::string& uid, const std::vector<std::string>& device_names) const {
  std::vector<cdi::SpecDevice> devs;
  for (const auto& name : device_names) {
    const Located* l = Find(name);
    if (l == nullptr) {
      return NotFound("device " + name + " is no longer present on this node (was it removed or was MIG reconfigured?)");
    }
    auto edits = l->mig != nullptr ? edits_.MigEdits(*l->mig, l->gpu) : edits_.GpuEdits(*l->gpu);
    if (!edits.ok()) return edits.status().Wrap("CDI edits for " + name);
    devs.push_back({name, std::move(edits).value()});
  }
  auto common = edits_.CommonGpuEdits();
  if (!common.ok()) return common.status().Wrap("common CDI edits");
  return cdi_.BuildClaimSpec(uid, devs, *common);
}

Result<driver::PreparedClaim> GpuKind::Prepare(const driver::ClaimWork& work, const driver::ClaimPlan& plan,
                                               const nlohmann::json& previous_undo) {
  driver::PreparedClaim out;
  out.undo = plan.undo;
  for (const auto& ts : plan.undo.value("timeSlicing", nlohmann::json::array())) {
    std::string uuid = ts.value("uuid", "");
    int interval = ts.value("interval", 0);
    NVDRA_RETURN_IF_ERROR(control_.SetComputeMode(uuid, "DEFAULT").Wrap("error applying config"));
    NVDRA_RETURN_IF_ERROR(control_.SetTimeSlice(uuid, interval).Wrap("error applying config"));
  }
  std::vector<std::string> names = plan.undo.value("devices", std::vector<std::string>{});
  NVDRA_ASSIGN_OR_RETURN(out.spec, BuildSpec(work.uid, names));
  for (const auto& r : work.results) {
    ledger::PreparedDevice d;
    d.requests = {r.request};
    d.pool = r.pool;
    d.device = r.device;
    d.cdi_device_ids = {cdi_.DeviceId(work.uid, r.device)};
    d.share_id = r.share_id;
    out.devices.push_back(std::move(d));
  }
  return out;
}

Result<cdi::Spec> GpuKind::RebuildSpec(const ledger::ClaimEntry& entry) {
  std::set<std::string> names;
  for (const auto& d : entry.prepared) names.insert(d.device);
  return BuildSpec(entry.uid, std::vector<std::string>(names.begin(), names.end()));
}

Status GpuKind::Unprepare(const ledger::ClaimEntry& entry) {
  const nlohmann::json& undo = entry.undo;
  if (!undo.is_object()) return Status::Ok();
  auto ts = undo.find("timeSlicing");
  if (ts == undo.end() || !ts->is_array()) return Status::Ok();
  for (const auto& item : *ts) {
    if (!item.is_object() || !item.contains("uuid") || !item["uuid"].is_string()) {
      spdlog::warn("claim {}: skipping an undo item this version does not understand: {}", entry.uid, item.dump());
      continue;
    }
    std::string uuid = item["uuid"].get<std::string>();
    bool present = std::any_of(inventory_.gpus.begin(), inventory_.gpus.end(),
                               [&](const devices::GpuInfo& g) { return g.uuid == uuid; });
    if (!present) {
      spdlog::warn("claim {}: GPU {} is gone; nothing to reset", entry.uid, uuid);
      continue;
    }
    NVDRA_RETURN_IF_ERROR(control_.SetTimeSlice(uuid, 0).Wrap("reset time-slice of " + uuid));
  }
  return Status::Ok();
}

}  // namespace nvdra::gpu
