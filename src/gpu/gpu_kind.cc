#include "gpu/gpu_kind.h"

#include <algorithm>
#include <set>

#include "gpu/gpu_published_devices.h"
#include "util/log.h"
#include "util/periodic_worker.h"

namespace nvdra::gpu {

namespace {

// The health sources of several plug-ins as one.
class HealthSources final : public devices::DeviceHealthSource {
 public:
  explicit HealthSources(std::vector<std::unique_ptr<devices::DeviceHealthSource>> sources)
      : sources_(std::move(sources)) {}
  ~HealthSources() override { Stop(); }
  Status Start(const devices::NodeInventory& inventory, devices::HealthCallback callback) override {
    for (const auto& s : sources_) NVDRA_RETURN_IF_ERROR(s->Start(inventory, callback));
    return Status::Ok();
  }
  void Stop() override {
    for (const auto& s : sources_) s->Stop();
  }

 private:
  const std::vector<std::unique_ptr<devices::DeviceHealthSource>> sources_;
};

// The claim as the plug-ins plan for it: its devices by type, and as the
// slice publishes them (each published once, when first asked).
class Planning final : public ClaimPlanning {
 public:
  Planning(const driver::ClaimWork& work, const GpuDeviceLookup& devices,
           std::function<model::PublishedDevice(const GpuDevice&)> publish)
      : work_(work), devices_(devices), publish_(std::move(publish)) {}
  const driver::ClaimWork& work() const override { return work_; }
  const GpuDevice* Find(const std::string& name) const override { return devices_.Find(name); }
  std::vector<const GpuDevice*> DevicesOf(const GpuDeviceType* type) const override {
    // By name, each once (a device may serve several requests).
    std::set<std::string> names;
    std::vector<const GpuDevice*> out;
    for (const auto& r : work_.results) {
      const GpuDevice* d = Find(r.device);
      if (d != nullptr && d->type == type && names.insert(d->name).second) out.push_back(d);
    }
    std::sort(out.begin(), out.end(), [](const GpuDevice* a, const GpuDevice* b) { return a->name < b->name; });
    return out;
  }
  const model::PublishedDevice* Published(const std::string& name) const override {
    const GpuDevice* d = Find(name);
    if (d == nullptr) return nullptr;
    auto it = published_.find(name);
    if (it == published_.end()) it = published_.emplace(name, publish_(*d)).first;
    return &it->second;
  }

 private:
  const driver::ClaimWork& work_;
  const GpuDeviceLookup& devices_;
  const std::function<model::PublishedDevice(const GpuDevice&)> publish_;
  mutable std::map<std::string, model::PublishedDevice> published_;
};

// Keeps the first failure of several steps that all run.
void KeepFirst(Status& first, Status s) {
  if (!s.ok() && first.ok()) first = std::move(s);
}

}  // namespace

GpuKind::GpuKind(devices::NodeInventory inventory, GpuContainerEdits edits, devices::GpuControl& control,
                 GpuKindOptions options, std::vector<std::unique_ptr<GpuDeviceType>> types)
    : inventory_(InventoryForFeatures(std::move(inventory), options.gates, options)),
      edits_(std::move(edits)),
      options_(std::move(options)),
      control_(control),
      features_(Features(std::move(types))) {
  for (const auto& f : features_) {
    if (const UndoPieceCodec* piece = f.plugin->undo_piece()) pieces_.push_back(*piece);
    if (!f.enabled) continue;
    for (auto& d : f.plugin->Devices(inventory_)) devices_.emplace(d.name, d);
  }
  // The decoder learns the kind's config kinds with the kind.
  if (Status st = RegisterGpuConfigKinds(); !st.ok()) NVDRA_ERROR("{}", st.message());
}

std::vector<GpuKind::Feature> GpuKind::Features(std::vector<std::unique_ptr<GpuDeviceType>> types) {
  const FeatureContext context{options_.gates, inventory_, control_, options_, edits_.IommuFdEnabled()};
  FeatureList list = RegisteredFeatures(context, std::move(types));
  if (options_.more_features) {
    for (auto& f : options_.more_features(context)) list.push_back(std::move(f));
  }
  std::vector<Feature> out;
  for (auto& f : list) out.push_back({std::move(f.feature), f.enabled});
  return out;
}

config::DriverConfigRules GpuKind::ConfigRules(const config::FeatureGates& gates) const {
  config::DriverConfigRules rules;
  rules.driver = kDriverName;
  for (const auto& f : features_) {
    if (f.enabled) f.plugin->AddConfigRules(gates, rules);
  }
  return rules;
}

GpuKind::~GpuKind() = default;

const GpuDevice* GpuKind::Find(const std::string& device) const {
  auto it = devices_.find(device);
  return it == devices_.end() ? nullptr : &it->second;
}

std::string GpuKind::DeviceType(const std::string& device) const {
  const GpuDevice* d = Find(device);
  return d == nullptr ? "" : std::string(d->type->name());
}

// Upstream pre-creates every type it has, whether its gate is on or not; a
// type registered here beyond those joins them.
std::vector<std::string> GpuKind::MetricDeviceTypes() const {
  std::vector<std::string> out;
  for (const auto& f : features_) f.plugin->AddMetricDeviceTypes(out);
  std::sort(out.begin(), out.end());
  out.emplace_back("unknown");
  return out;
}

model::PublishedDevice GpuKind::Publish(const GpuDevice& device) const {
  model::PublishedDevice d = device.type->Publish(device);
  ApplyListTypeAttributes(d, options_.gates);
  for (const auto& f : features_) {
    if (f.enabled) f.plugin->Decorate(device, d);
  }
  return d;
}

std::map<std::string, model::AttributeValue> GpuKind::MetadataAttributes(const std::string& device) const {
  const GpuDevice* d = Find(device);
  if (d == nullptr) return {};
  for (const auto& f : features_) {
    if (f.enabled && f.plugin->PublishesMetadata(*d)) return Publish(*d).attributes;
  }
  return {};
}

std::vector<model::PublishedDevice> GpuKind::PublishedDevices() const {
  std::vector<model::PublishedDevice> out;
  for (const auto& [name, d] : devices_) {
    // While its twin is prepared, a device is not offered: the ledger would
    // refuse it anyway.
    if (!d.twin.empty() && options_.device_prepared && options_.device_prepared(d.twin)) continue;
    out.push_back(Publish(d));
  }
  SortByBusId(out);
  out = taints_.Decorate(std::move(out));
  for (const auto& f : features_) {
    if (f.enabled) f.plugin->DecoratePublished(out);
  }
  return out;
}

std::unique_ptr<devices::DeviceHealthSource> GpuKind::NewOwnHealthSource() {
  std::vector<std::unique_ptr<devices::DeviceHealthSource>> sources;
  for (const auto& f : features_) {
    if (!f.enabled) continue;
    if (auto s = f.plugin->NewHealthSource()) sources.push_back(std::move(s));
  }
  if (sources.empty()) return nullptr;
  if (sources.size() == 1) return std::move(sources.front());
  return std::make_unique<HealthSources>(std::move(sources));
}

Status GpuKind::RunOwedWorkForTest() {
  Status first;
  for (const auto& f : features_) {
    if (f.enabled) KeepFirst(first, f.plugin->RunOwedWork());
  }
  return first;
}

Result<driver::ClaimPlan> GpuKind::Plan(const driver::ClaimWork& work) {
  GpuUndo undo;
  driver::ClaimPlan plan;
  for (const auto& group : work.groups) {
    const std::string name = SharingStrategyOf(group.config);
    bool served = name.empty();
    for (const auto& f : features_) served = served || (f.enabled && f.plugin->sharing_strategy() == name);
    if (!served) return Internal("no handler for GPU sharing strategy \"" + name + "\"");
  }
  const Planning claim(work, *this, [this](const GpuDevice& d) { return Publish(d); });
  for (const auto& f : features_) {
    if (f.enabled) NVDRA_RETURN_IF_ERROR(f.plugin->Plan(claim, undo, plan));
  }
  std::set<std::string> names, held;
  for (const auto& r : work.results) {
    names.insert(r.device);
    const GpuDevice* d = Find(r.device);
    if (r.admin_access) continue;
    if (d == nullptr) {
      held.insert(r.device);
    } else {
      for (auto& h : d->type->Held(*d)) held.insert(std::move(h));
    }
  }
  undo.devices.assign(names.begin(), names.end());
  plan.undo = EncodeGpuUndo(undo);
  plan.held.assign(held.begin(), held.end());
  plan.decoded_undo = std::make_shared<const GpuUndo>(std::move(undo));
  plan.decoded_by = this;
  return plan;
}

Result<GpuUndo> GpuKind::Decode(const nlohmann::json& undo_json, bool imported) const {
  NVDRA_ASSIGN_OR_RETURN(GpuUndo undo, DecodeGpuUndo(undo_json, pieces_));
  if (imported) {
    for (const auto& f : features_) f.plugin->CompleteImported(undo);
  }
  return undo;
}

Result<driver::ClaimEdits> GpuKind::EditsFor(const GpuUndo& undo) const {
  ClaimEditsDraft draft;
  for (const auto& name : undo.devices) {
    const GpuDevice* d = Find(name);
    if (d == nullptr) {
      return NotFound("device " + name +
                      " is no longer present on this node (was it removed, or was its GPU partitioned anew?)");
    }
    auto edits = d->type->Edits(*d, undo, edits_);
    if (!edits.ok()) return edits.status().Wrap("CDI edits for " + name);
    draft.devices.push_back({d, std::move(edits).value()});
  }
  for (const auto& f : features_) {
    if (f.enabled) NVDRA_RETURN_IF_ERROR(f.plugin->AddEdits(undo, edits_, draft));
  }
  driver::ClaimEdits out;
  for (auto& [device, edits] : draft.devices) out.devices.push_back({device->name, std::move(edits)});
  if (draft.common) {
    out.common = std::move(*draft.common);
  } else {
    auto common = edits_.SharedCommon();
    if (!common.ok()) return common.status().Wrap("common CDI edits");
    out.shared_common = std::move(common).value();
  }
  return out;
}

Result<driver::PreparedClaim> GpuKind::Prepare(const driver::ClaimWork& work, const driver::ClaimPlan& plan) {
  GpuUndo undo;
  const GpuUndo* planned = nullptr;
  if (plan.decoded_by == this && plan.decoded_undo != nullptr) {
    planned = static_cast<const GpuUndo*>(plan.decoded_undo.get());
    undo = *planned;
  } else {
    NVDRA_ASSIGN_OR_RETURN(undo, Decode(plan.undo, /*imported=*/false));
  }
  driver::PreparedClaim out;
  for (const auto& f : features_) {
    if (!f.enabled) continue;
    NVDRA_RETURN_IF_ERROR(f.plugin->Apply(work.uid, undo));
    out.await_ready = out.await_ready || f.plugin->HasWait(undo);
  }
  NVDRA_ASSIGN_OR_RETURN(out.edits, EditsFor(undo));
  // Most plug-ins apply without adding to the record: then it is the one
  // planned, already encoded.
  out.undo = planned != nullptr && undo == *planned ? plan.undo : EncodeGpuUndo(undo);
  RepublishIfTwinned(undo.devices);
  return out;
}

void GpuKind::SetRepublish(std::function<void()> republish) {
  MutexLock l(republish_mu_);
  republish_ = std::move(republish);
}

void GpuKind::RepublishIfTwinned(const std::vector<std::string>& devices) {
  if (!options_.device_prepared) return;
  bool twinned = false;
  for (const auto& name : devices) {
    const GpuDevice* d = Find(name);
    twinned = twinned || (d != nullptr && !d->twin.empty());
  }
  if (!twinned) return;
  MutexLock l(republish_mu_);
  if (republish_) republish_();
}

Status GpuKind::AwaitReady(const driver::ClaimWork& work, const nlohmann::json& undo_json) {
  NVDRA_ASSIGN_OR_RETURN(GpuUndo undo, Decode(undo_json));
  for (const auto& f : features_) {
    if (f.enabled && f.plugin->HasWait(undo)) NVDRA_RETURN_IF_ERROR(f.plugin->AwaitReady(undo, work.deadline));
  }
  return Status::Ok();
}

Result<driver::ClaimEdits> GpuKind::Edits(const nlohmann::json& undo_json,
                                          const std::vector<std::string>& prepared_devices) {
  NVDRA_ASSIGN_OR_RETURN(GpuUndo undo, Decode(undo_json));
  if (undo.devices.empty()) {
    // A record imported from the Go driver's checkpoint lists no devices.
    std::set<std::string> names(prepared_devices.begin(), prepared_devices.end());
    undo.devices.assign(names.begin(), names.end());
  }
  return EditsFor(undo);
}

Status GpuKind::Unprepare(const std::string& claim_uid, const nlohmann::json& undo_json) {
  auto undo = Decode(undo_json);
  if (driver::SkipUnreadableUndo(claim_uid, undo.status())) return Status::Ok();
  for (const auto& [key, piece] : undo->unreadable) {
    NVDRA_WARN("claim {}: skipping the \"{}\" piece of its undo record, which this version cannot read{}: {}",
               claim_uid, key, piece.version ? " (version " + std::to_string(*piece.version) + ")" : "",
               piece.value.dump());
  }
  // In the reverse order of Prepare, every plug-in, also one whose gate is
  // now off (what its piece names is undone all the same). Every undo runs,
  // so each one's attempts count, even when an earlier one failed.
  Status first;
  for (auto it = features_.rbegin(); it != features_.rend(); ++it) {
    KeepFirst(first, it->plugin->Undo(claim_uid, *undo));
  }
  // Its entry is being unprepared now: the withdrawn twin comes back.
  if (first.ok()) RepublishIfTwinned(undo->devices);
  return first;
}

Result<int> GpuKind::SweepOrphans(const UndoRecords& undo_records, bool at_start) {
  int removed = 0;
  Status first;
  for (const auto& f : features_) {
    if (!f.enabled || !f.plugin->sweep()) continue;
    auto n = f.plugin->SweepOrphans(undo_records, at_start);
    if (n.ok()) removed += *n;
    KeepFirst(first, n.status());
  }
  if (!first.ok()) return first;
  return removed;
}

void GpuKind::StartSweeps(PeriodicWorkerOptions worker, UndoRecords undo_records) {
  if (!sweeps_.empty()) return;
  for (const auto& f : features_) {
    std::optional<FeatureSweep> sweep = f.enabled ? f.plugin->sweep() : std::nullopt;
    if (!sweep) continue;
    PeriodicWorkerOptions o = worker;
    o.name = sweep->name;
    o.run_at_start = sweep->run_at_start;
    if (sweep->period) o.period = *sweep->period;
    ClaimFeature* plugin = f.plugin.get();
    sweeps_.push_back(std::make_unique<PeriodicWorker>(o,
                                                       [plugin, records = undo_records,
                                                        at_start = sweep->run_at_start]() mutable -> Status {
                                                         Status s = plugin->SweepOrphans(records, at_start).status();
                                                         if (s.ok()) at_start = false;
                                                         return s;
                                                       }));
    sweeps_.back()->Start();
  }
}

}  // namespace nvdra::gpu
