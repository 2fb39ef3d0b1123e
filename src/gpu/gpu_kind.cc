#include "gpu/gpu_kind.h"

#include <algorithm>
#include <set>

#include "devices/published_devices.h"
#include "util/periodic_worker.h"
#include "util/log.h"

namespace nvdra::gpu {

config::DriverConfigRules GpuConfigRules(const config::FeatureGates& gates) {
  config::DriverConfigRules rules;
  rules.driver = kDriverName;
  rules.device_types = {std::string(config::kDeviceTypeGpu), std::string(config::kDeviceTypeMig),
                        std::string(config::kDeviceTypeVfio)};
  // Passthrough devices get a default config only with the gate on.
  if (gates.Enabled(config::Gate::kPassthroughSupport)) rules.defaults.push_back(config::VfioDeviceConfig{});
  rules.defaults.push_back(config::MigDeviceConfig{});
  rules.defaults.push_back(config::GpuConfig{});
  rules.missing_config_hint = "is the PassthroughSupport feature gate enabled?";
  return rules;
}

namespace {

// The background retry of owed time-slice resets, as a health source: the
// plugin owns its lifetime like the hardware's, so its reports stop before
// what they feed (the slice publisher, the health stream) is taken down.
class OwedResetRetry final : public devices::DeviceHealthSource {
 public:
  OwedResetRetry(TimeSliceResets& resets, std::chrono::milliseconds period) : resets_(resets), period_(period) {}
  ~OwedResetRetry() override { Stop(); }

  Status Start(const devices::NodeInventory&, devices::HealthCallback callback) override {
    resets_.SetReporter(callback);
    for (const auto& device : resets_.OwingDevices()) {
      callback({device, devices::HealthState::kUnhealthy, std::nullopt,
                "owes a time-slice reset from before the plugin restarted"});
    }
    PeriodicWorkerOptions o;
    o.period = period_;
    o.jitter = 0.1;
    o.run_at_start = false;
    o.name = "time-slice reset retry";
    o.thread_name = "reset-retry";
    worker_ = std::make_unique<PeriodicWorker>(o, [this] { return resets_.RetryOwed(); });
    worker_->Start();
    return Status::Ok();
  }
  void Stop() override {
    worker_.reset();
    resets_.SetReporter(nullptr);
  }

 private:
  TimeSliceResets& resets_;
  const std::chrono::milliseconds period_;
  std::unique_ptr<PeriodicWorker> worker_;
};

}  // namespace

GpuKind::GpuKind(devices::NodeInventory inventory, devices::DeviceEdits edits, devices::GpuControl& control,
                 GpuKindOptions options)
    : inventory_(std::move(inventory)),
      edits_(std::move(edits)),
      options_(std::move(options)),
      resets_(control, options_.resets) {
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
  return std::string(l->mig != nullptr ? config::kDeviceTypeMig : config::kDeviceTypeGpu);
}

std::vector<std::string> GpuKind::MetricDeviceTypes() const { return {"gpu", "mig", "vfio", "unknown"}; }

std::vector<model::PublishedDevice> GpuKind::PublishedDevices() const {
  return resets_.Decorate(taints_.Decorate(devices::GpuPublishedDevices(inventory_)));
}

std::unique_ptr<devices::DeviceHealthSource> GpuKind::NewOwnHealthSource() {
  return std::make_unique<OwedResetRetry>(resets_, options_.reset_retry_period);
}

Result<driver::ClaimPlan> GpuKind::Plan(const driver::ClaimWork& work) {
  GpuUndo undo;
  for (const auto& group : work.groups) {
    if (const auto* gc = std::get_if<config::GpuConfig>(&group.config)) {
      if (gc->IsMps()) return FailedPrecondition("MPS sharing is not supported yet by nvdra");
      if (!gc->IsTimeSlicing()) continue;
      auto interval = gc->TimeSlice();
      if (!interval) continue;
      for (const auto& r : group.results) {
        const Located* l = Find(r.device);
        if (l == nullptr || l->mig != nullptr) continue;
        undo.time_slicing.push_back({r.device, l->gpu->uuid, static_cast<int>(*interval), nlohmann::json::object()});
      }
    } else if (const auto* mc = std::get_if<config::MigDeviceConfig>(&group.config)) {
      if (mc->IsMps()) return FailedPrecondition("MPS sharing is not supported yet by nvdra");
    }
  }
  std::set<std::string> names;
  for (const auto& r : work.results) names.insert(r.device);
  undo.devices.assign(names.begin(), names.end());
  driver::ClaimPlan plan;
  plan.undo = EncodeGpuUndo(undo);
  return plan;
}

Result<driver::ClaimEdits> GpuKind::EditsFor(const std::vector<std::string>& device_names) const {
  driver::ClaimEdits out;
  for (const auto& name : device_names) {
    const Located* l = Find(name);
    if (l == nullptr) {
      return NotFound("device " + name + " is no longer present on this node (was it removed or was MIG reconfigured?)");
    }
    auto edits = l->mig != nullptr ? edits_.MigEdits(*l->mig, l->gpu) : edits_.GpuEdits(*l->gpu);
    if (!edits.ok()) return edits.status().Wrap("CDI edits for " + name);
    out.devices.push_back({name, std::move(edits).value()});
  }
  auto common = edits_.CommonGpuEdits();
  if (!common.ok()) return common.status().Wrap("common CDI edits");
  out.common = std::move(common).value();
  return out;
}

Result<driver::PreparedClaim> GpuKind::Prepare(const driver::ClaimWork& work, const driver::ClaimPlan& plan) {
  NVDRA_ASSIGN_OR_RETURN(GpuUndo undo, DecodeGpuUndo(plan.undo));
  for (const auto& ts : undo.time_slicing) {
    NVDRA_RETURN_IF_ERROR(resets_.Apply(ts.device, ts.uuid, ts.interval).Wrap("error applying config"));
  }
  driver::PreparedClaim out;
  NVDRA_ASSIGN_OR_RETURN(out.edits, EditsFor(undo.devices));
  out.undo = EncodeGpuUndo(undo);
  return out;
}

Result<driver::ClaimEdits> GpuKind::Edits(const nlohmann::json& undo_json,
                                          const std::vector<std::string>& prepared_devices) {
  NVDRA_ASSIGN_OR_RETURN(GpuUndo undo, DecodeGpuUndo(undo_json));
  if (undo.devices.empty()) {
    // A record imported from the Go driver's checkpoint lists no devices.
    std::set<std::string> names(prepared_devices.begin(), prepared_devices.end());
    undo.devices.assign(names.begin(), names.end());
  }
  return EditsFor(undo.devices);
}

Status GpuKind::Unprepare(const std::string& claim_uid, const nlohmann::json& undo_json) {
  auto undo = DecodeGpuUndo(undo_json);
  if (!undo.ok()) {
    NVDRA_WARN("claim {}: skipping an undo record this version does not understand: {}", claim_uid,
                 undo.status().message());
    return Status::Ok();
  }
  for (const auto& item : undo->unreadable_time_slicing) {
    NVDRA_WARN("claim {}: skipping an undo item this version does not understand: {}", claim_uid, item.dump());
  }
  // Every GPU's reset is tried, so each one's attempts count, even when an
  // earlier one failed.
  Status first;
  for (const auto& ts : undo->time_slicing) {
    auto gpu = std::find_if(inventory_.gpus.begin(), inventory_.gpus.end(),
                            [&](const devices::GpuInfo& g) { return g.uuid == ts.uuid; });
    if (gpu == inventory_.gpus.end()) {
      NVDRA_WARN("claim {}: GPU {} is gone; nothing to reset", claim_uid, ts.uuid);
      continue;
    }
    Status s = resets_.ResetForClaim(claim_uid, devices::GpuDeviceName(gpu->minor), ts.uuid);
    if (!s.ok() && first.ok()) first = s;
  }
  if (!first.ok()) return first;
  return Status::Ok();
}

}  // namespace nvdra::gpu
