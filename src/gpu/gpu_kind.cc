#include "gpu/gpu_kind.h"

#include <algorithm>
#include <set>

#include "gpu/dynamic_mig_type.h"
#include "gpu/gpu_handlers.h"
#include "gpu/gpu_published_devices.h"
#include "gpu/vfio_type.h"
#include "util/file_util.h"
#include "util/json_reader.h"
#include "util/periodic_worker.h"
#include "util/log.h"

namespace nvdra::gpu {

namespace {

config::DriverConfigRules RulesOf(const std::vector<std::unique_ptr<GpuDeviceType>>& types,
                                  const config::FeatureGates& gates) {
  config::DriverConfigRules rules;
  rules.driver = kDriverName;
  for (const auto& type : types) {
    rules.device_types.push_back({std::string(type->name()), std::string(type->config_kind())});
    if (auto d = type->DefaultConfig(gates)) rules.defaults.push_back(std::move(*d));
  }
  return rules;
}

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

namespace {

// With passthrough, the GPUs NVML cannot see because they are on vfio-pci.
devices::NodeInventory WithGpusOnVfio(devices::NodeInventory inventory, const GpuKindOptions& options) {
  if (options.gates.Enabled(config::Gate::kPassthroughSupport) && options.pci != nullptr) {
    Status s = VfioType::AddGpusOnVfio(*options.pci, inventory);
    if (!s.ok()) NVDRA_WARN("looking for GPUs bound to vfio-pci: {}", s.ToString());
  }
  return inventory;
}

}  // namespace

config::DriverConfigRules GpuConfigRules(const config::FeatureGates& gates) {
  return RulesOf(RegisteredDeviceTypes(gates), gates);
}

GpuKind::GpuKind(devices::NodeInventory inventory, GpuContainerEdits edits, devices::GpuControl& control,
                 GpuKindOptions options, std::vector<std::unique_ptr<GpuDeviceType>> types)
    : inventory_(WithGpusOnVfio(std::move(inventory), options)),
      edits_(std::move(edits)),
      options_(std::move(options)),
      types_(types.empty() ? RegisteredDeviceTypes(options_.gates, {&inventory_, &control, options_.pci,
                                                                    edits_.IommuFdEnabled(), &options_.passthrough})
                           : std::move(types)),
      control_(control),
      resets_(control, options_.resets),
      strategies_(RegisteredSharingStrategies({resets_, inventory_, control, options_.mps, options_.consumable_shares,
                                               options_.consumable_shares.enabled() ? options_.shared_with_others
                                                                                    : DeviceSharedWithOthers()})) {
  for (const auto& type : types_) {
    for (auto& d : type->Devices(inventory_)) devices_.emplace(d.name, d);
  }
  // The decoder learns the kind's config kinds with the kind.
  if (Status st = RegisterGpuConfigKinds(); !st.ok()) NVDRA_ERROR("{}", st.message());
  for (const auto& s : strategies_) {
    if (auto* m = dynamic_cast<MpsStrategy*>(s.get())) mps_ = m;
  }
  for (const auto& t : types_) {
    if (auto* m = dynamic_cast<DynamicMigType*>(t.get())) dynamic_mig_ = m;
    if (auto* v = dynamic_cast<VfioType*>(t.get())) vfio_ = v;
  }
}

config::DriverConfigRules GpuKind::ConfigRules(const config::FeatureGates& gates) const {
  return RulesOf(types_, gates);
}

GpuKind::~GpuKind() = default;

const GpuDevice* GpuKind::Find(const std::string& device) const {
  auto it = devices_.find(device);
  return it == devices_.end() ? nullptr : &it->second;
}

SharingStrategy* GpuKind::StrategyNamed(const std::string& name) const {
  for (const auto& s : strategies_) {
    if (s->name() == name) return s.get();
  }
  return nullptr;
}

std::string GpuKind::DeviceType(const std::string& device) const {
  const GpuDevice* d = Find(device);
  return d == nullptr ? "" : std::string(d->type->name());
}

// Upstream pre-creates every type it has, passthrough included; a type
// registered here beyond those joins them.
std::vector<std::string> GpuKind::MetricDeviceTypes() const {
  std::vector<std::string> out = {std::string(kDeviceTypeGpu), std::string(kDeviceTypeMig),
                                  std::string(kDeviceTypeVfio)};
  for (const auto& t : types_) {
    if (std::find(out.begin(), out.end(), t->name()) == out.end()) out.emplace_back(t->name());
  }
  out.emplace_back("unknown");
  return out;
}

model::PublishedDevice GpuKind::Publish(const GpuDevice& device) const {
  model::PublishedDevice d = device.type->Publish(device);
  ApplyListTypeAttributes(d, options_.gates);
  // Full GPUs and MIG devices may be shared; a passthrough (VFIO) device
  // may not, as upstream.
  if (device.type->name() == kDeviceTypeGpu || device.type->name() == kDeviceTypeMig) {
    ApplyConsumableShares(d, options_.consumable_shares);
  }
  // Full and passthrough GPUs carry their Fabric Manager attributes, as upstream.
  const bool fabric_type = device.type->name() == kDeviceTypeGpu || device.type->name() == kDeviceTypeVfio;
  if (fabric_type && options_.gates.Enabled(config::Gate::kFabricManagerPartitioning)) {
    if (options_.fabric != nullptr) {
      options_.fabric->PutAttributes(*device.gpu, d);
    } else {
      PutModuleIdAttribute(*device.gpu, d);
    }
  }
  return d;
}

std::map<std::string, model::AttributeValue> GpuKind::MetadataAttributes(const std::string& device) const {
  const GpuDevice* d = Find(device);
  if (d == nullptr || d->type->name() != kDeviceTypeVfio) return {};
  return Publish(*d).attributes;
}

std::vector<model::PublishedDevice> GpuKind::PublishedDevices() const {
  std::vector<model::PublishedDevice> out;
  for (const auto& [name, d] : devices_) {
    // While its passthrough twin (or, for a twin, its GPU) is prepared, a
    // device is not offered: the ledger would refuse it anyway.
    if (!d.twin.empty() && options_.device_prepared && options_.device_prepared(d.twin)) continue;
    out.push_back(Publish(d));
  }
  SortByBusId(out);
  return resets_.Decorate(taints_.Decorate(std::move(out)));
}

std::unique_ptr<devices::DeviceHealthSource> GpuKind::NewOwnHealthSource() {
  return std::make_unique<OwedResetRetry>(resets_, options_.reset_retry_period);
}

Result<driver::ClaimPlan> GpuKind::Plan(const driver::ClaimWork& work) {
  GpuUndo undo;
  std::map<const GpuDeviceType*, std::vector<const GpuDevice*>> by_type;
  for (const auto& r : work.results) {
    if (const GpuDevice* d = Find(r.device)) by_type[d->type].push_back(d);
  }
  for (const auto& type : types_) {
    auto it = by_type.find(type.get());
    if (it == by_type.end()) continue;
    // By name, each once (a device may serve several requests).
    auto& devs = it->second;
    std::sort(devs.begin(), devs.end(), [](const GpuDevice* a, const GpuDevice* b) { return a->name < b->name; });
    devs.erase(std::unique(devs.begin(), devs.end()), devs.end());
    NVDRA_RETURN_IF_ERROR(type->Plan(devs, undo));
  }
  NVDRA_RETURN_IF_ERROR(PlanFabricPartition(work, undo));
  // The claim's VfioDeviceConfig decides its passthrough devices' edits;
  // the record carries it, as Unprepare and a repeated Prepare read only that.
  int vfio_groups = 0;
  for (const auto& group : work.groups) {
    const auto* v = group.config.As<VfioDeviceConfig>();
    if (v == nullptr) continue;
    ++vfio_groups;
    for (const auto& r : group.results) {
      for (auto& item : undo.vfio) {
        if (item.device != r.device) continue;
        item.prefer_iommufd = v->iommu && v->iommu->backend_policy == kIommuPreferIommuFD;
        item.enable_api_device = v->iommu && v->iommu->enable_api_device.value_or(false);
      }
    }
  }
  if (vfio_groups > 1) {
    return InvalidArgument("claim " + work.ns + "/" + work.name + ":" + work.uid + " contains " +
                           std::to_string(vfio_groups) + " VFIO device groups, but at most one is supported per claim");
  }
  for (const auto& group : work.groups) {
    std::string name = SharingStrategyOf(group.config);
    if (name.empty()) continue;
    // As upstream (unreachable while the gates exclude each other).
    if (name == kMpsStrategy && options_.gates.Enabled(config::Gate::kDynamicMIG)) {
      return FailedPrecondition("MPS is not yet supported when using featureGates.DynamicMIG=true");
    }
    SharingStrategy* strategy = StrategyNamed(name);
    if (strategy == nullptr) return Internal("no handler for GPU sharing strategy \"" + name + "\"");
    NVDRA_RETURN_IF_ERROR(strategy->Plan(work.uid, group, *this, undo));
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
  driver::ClaimPlan plan;
  plan.undo = EncodeGpuUndo(undo);
  plan.held.assign(held.begin(), held.end());
  if (options_.consumable_shares.enabled()) {
    std::map<std::string, model::PublishedDevice> published;
    auto lookup = [&](const std::string& name) -> const model::PublishedDevice* {
      const GpuDevice* d = Find(name);
      if (d == nullptr) return nullptr;
      return &published.try_emplace(name, Publish(*d)).first->second;
    };
    NVDRA_ASSIGN_OR_RETURN(plan.shares, PlanShares(work, lookup));
  }
  return plan;
}

Result<GpuUndo> GpuKind::Decode(const nlohmann::json& undo_json) const {
  NVDRA_ASSIGN_OR_RETURN(GpuUndo undo, DecodeGpuUndo(undo_json));
  // A daemon imported from the Go driver's checkpoint knows only its id: it
  // runs in this plugin's namespace, its files where upstream keeps them.
  for (auto& d : undo.mps) {
    if (d.ns.empty()) d.ns = options_.mps.settings.ns;
    if (d.root.empty()) d.root = JoinPath(JoinPath(options_.mps.settings.plugin_dir, "mps"), d.id);
  }
  return undo;
}

Result<driver::ClaimEdits> GpuKind::EditsFor(const GpuUndo& undo) const {
  driver::ClaimEdits out;
  for (const auto& name : undo.devices) {
    const GpuDevice* d = Find(name);
    if (d == nullptr) {
      return NotFound("device " + name + " is no longer present on this node (was it removed or was MIG reconfigured?)");
    }
    auto edits = d->type->Edits(*d, undo, edits_);
    if (!edits.ok()) return edits.status().Wrap("CDI edits for " + name);
    // A device shared through an MPS daemon gets the daemon's edits too.
    const std::string& uuid = d->mig != nullptr ? d->mig->uuid : d->gpu->uuid;
    for (const auto& daemon : undo.mps) {
      if (std::find(daemon.uuids.begin(), daemon.uuids.end(), uuid) != daemon.uuids.end()) {
        edits->Append(MpsContainerEdits(daemon));
      }
    }
    out.devices.push_back({name, std::move(edits).value()});
  }
  // A passthrough claim's containers get the VFIO edits instead of the
  // driver's, as upstream.
  bool api_device = false, iommufd = false;
  for (const auto& v : undo.vfio) {
    api_device = api_device || v.enable_api_device;
    iommufd = iommufd || v.prefer_iommufd;
  }
  auto common = undo.vfio.empty() ? edits_.Common() : edits_.VfioCommon(api_device, iommufd && edits_.IommuFdEnabled());
  if (!common.ok()) return common.status().Wrap("common CDI edits");
  out.common = std::move(common).value();
  return out;
}

Result<driver::PreparedClaim> GpuKind::Prepare(const driver::ClaimWork& work, const driver::ClaimPlan& plan) {
  NVDRA_ASSIGN_OR_RETURN(GpuUndo undo, DecodeGpuUndo(plan.undo));
  // The claim's NVLink fabric first, as upstream; then the devices (a MIG
  // device must exist before it is shared), then their sharing.
  if (undo.fabric_partition) {
    if (options_.fabric == nullptr) {
      return FailedPrecondition("the claim's record names Fabric Manager partition " +
                                std::to_string(undo.fabric_partition->id) +
                                ", but this plugin runs without FabricManagerPartitioning");
    }
    NVDRA_RETURN_IF_ERROR(options_.fabric->Activate(work.uid, *undo.fabric_partition));
  }
  for (const auto& t : types_) NVDRA_RETURN_IF_ERROR(t->Apply(undo));
  driver::PreparedClaim out;
  for (const auto& s : strategies_) {
    NVDRA_RETURN_IF_ERROR(s->Apply(undo));
    out.await_ready = out.await_ready || s->HasWait(undo);
  }
  NVDRA_ASSIGN_OR_RETURN(out.edits, EditsFor(undo));
  out.undo = EncodeGpuUndo(undo);
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
  for (const auto& s : strategies_) {
    if (s->HasWait(undo)) NVDRA_RETURN_IF_ERROR(s->AwaitReady(undo, work.deadline));
  }
  return Status::Ok();
}

void GpuKind::StartMpsSweep(PeriodicWorkerOptions worker, UndoRecords undo_records) {
  if (mps_ == nullptr || mps_sweep_ != nullptr) return;
  mps_sweep_ = std::make_unique<PeriodicWorker>(worker, [this, records = std::move(undo_records)]() -> Status {
    return SweepOrphanMpsDaemons(records).status();
  });
  mps_sweep_->Start();
}

Result<int> GpuKind::SweepOrphanMpsDaemons(
    const std::function<Result<std::vector<nlohmann::json>>()>& undo_records) {
  if (mps_ == nullptr) return 0;
  return mps_->SweepOrphans([&]() -> Result<std::vector<MpsDaemonUndo>> {
    NVDRA_ASSIGN_OR_RETURN(std::vector<nlohmann::json> records, undo_records());
    // Read leniently: an item this version cannot decode (a newer one's)
    // still owns the daemon it names.
    std::vector<MpsDaemonUndo> out;
    for (const auto& r : records) {
      if (!r.is_object() || !r.contains("mps") || !r["mps"].is_array()) continue;
      for (const auto& item : r["mps"]) {
        if (!item.is_object()) continue;
        MpsDaemonUndo d;
        if (item.contains("deployment") && item["deployment"].is_string()) d.deployment = item["deployment"];
        if (item.contains("id") && item["id"].is_string()) d.id = item["id"];
        out.push_back(std::move(d));
      }
    }
    return out;
  });
}

void GpuKind::StartMigSweep(PeriodicWorkerOptions worker, UndoRecords undo_records) {
  if (dynamic_mig_ == nullptr || mig_sweep_ != nullptr) return;
  worker.run_at_start = true;
  mig_sweep_ = std::make_unique<PeriodicWorker>(
      worker, [this, records = std::move(undo_records), first = true]() mutable -> Status {
        Status s = SweepOrphanMigDevices(records, first).status();
        if (s.ok()) first = false;
        return s;
      });
  mig_sweep_->Start();
}

Result<int> GpuKind::SweepOrphanMigDevices(const UndoRecords& undo_records, bool disable_idle_mig_mode) {
  if (dynamic_mig_ == nullptr) return 0;
  return dynamic_mig_->SweepOrphans([&]() -> Result<std::vector<GpuUndo>> {
    NVDRA_ASSIGN_OR_RETURN(std::vector<nlohmann::json> records, undo_records());
    // Read leniently: a record this version cannot decode still owns what
    // its readable MIG items name.
    std::vector<GpuUndo> out;
    for (const auto& r : records) {
      if (!r.is_object() || !r.contains("mig") || !r["mig"].is_array()) continue;
      auto decoded = DecodeGpuUndo(nlohmann::json{{"mig", r["mig"]}});
      if (decoded.ok()) out.push_back(std::move(decoded).value());
    }
    return out;
  }, disable_idle_mig_mode);
}

void GpuKind::StartVfioSweep(PeriodicWorkerOptions worker, UndoRecords undo_records) {
  if (vfio_ == nullptr || vfio_sweep_ != nullptr) return;
  worker.run_at_start = true;
  vfio_sweep_ = std::make_unique<PeriodicWorker>(worker, [this, records = std::move(undo_records)]() -> Status {
    return SweepOrphanVfioDevices(records).status();
  });
  vfio_sweep_->Start();
}

Result<int> GpuKind::SweepOrphanVfioDevices(const UndoRecords& undo_records) {
  if (vfio_ == nullptr) return 0;
  return vfio_->SweepOrphans(inventory_, [&]() -> Result<std::vector<GpuUndo>> {
    NVDRA_ASSIGN_OR_RETURN(std::vector<nlohmann::json> records, undo_records());
    // Read leniently: a record this version cannot decode still owns what
    // its readable vfio items name.
    std::vector<GpuUndo> out;
    for (const auto& r : records) {
      if (!r.is_object() || !r.contains("vfio") || !r["vfio"].is_array()) continue;
      auto decoded = DecodeGpuUndo(nlohmann::json{{"vfio", r["vfio"]}});
      if (decoded.ok()) out.push_back(std::move(decoded).value());
    }
    return out;
  });
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
  // In the reverse order of Prepare: the sharing first, then the devices.
  // Every undo runs, so each one's attempts count, even when an earlier one
  // failed.
  Status first;
  for (const auto& s : strategies_) {
    Status st = s->Undo(claim_uid, *undo);
    if (!st.ok() && first.ok()) first = st;
  }
  for (const auto& t : types_) {
    Status st = t->Undo(claim_uid, *undo);
    if (!st.ok() && first.ok()) first = st;
  }
  // MIG devices a dynamic MIG Prepare created are destroyed even when the
  // plugin now runs without the gate.
  if (dynamic_mig_ == nullptr && !undo->mig.empty()) {
    Status st = DynamicMigType(&control_, &inventory_).Undo(claim_uid, *undo);
    if (!st.ok() && first.ok()) first = st;
  }
  // GPUs a passthrough Prepare bound to vfio-pci go back to nvidia even
  // when the plugin now runs without the gate.
  if (vfio_ == nullptr && !undo->vfio.empty()) {
    Status st = options_.pci == nullptr ? Internal("no PCI driver control to bind passthrough GPUs back to nvidia")
                                        : VfioType(options_.pci, false).Undo(claim_uid, *undo);
    if (!st.ok() && first.ok()) first = st;
  }
  // Last, as upstream: the GPUs are back on nvidia before their fabric goes.
  Status st = UndoFabricPartition(claim_uid, *undo);
  if (!st.ok() && first.ok()) first = st;
  // Its entry is being unprepared now: the withdrawn twin comes back.
  if (first.ok()) RepublishIfTwinned(undo->devices);
  return first;
}

Status GpuKind::PlanFabricPartition(const driver::ClaimWork& work, GpuUndo& undo) const {
  if (options_.fabric == nullptr) return Status::Ok();
  // The physical GPUs of the claim's full and passthrough devices, each
  // once, in the claim's order; an admin-access result holds nothing, so it
  // neither activates nor releases a partition.
  std::vector<const devices::GpuInfo*> gpus;
  for (const auto& r : work.results) {
    const GpuDevice* d = r.admin_access ? nullptr : Find(r.device);
    if (d == nullptr || (d->type->name() != kDeviceTypeGpu && d->type->name() != kDeviceTypeVfio)) continue;
    if (std::find(gpus.begin(), gpus.end(), d->gpu) == gpus.end()) gpus.push_back(d->gpu);
  }
  if (gpus.empty()) return Status::Ok();
  NVDRA_ASSIGN_OR_RETURN(undo.fabric_partition, options_.fabric->Match(gpus));
  return Status::Ok();
}

Status GpuKind::UndoFabricPartition(const std::string& claim_uid, const GpuUndo& undo) const {
  if (!undo.fabric_partition) return Status::Ok();
  const int id = undo.fabric_partition->id;
  if (options_.fabric == nullptr) {
    NVDRA_WARN("claim {}: Fabric Manager partition {} is left as it is: this plugin runs without "
               "FabricManagerPartitioning",
               claim_uid, id);
    return Status::Ok();
  }
  // With consumable shares, a claim still sharing these GPUs keeps their fabric.
  if (options_.consumable_shares.enabled() && options_.shared_with_others) {
    for (const auto& device : undo.devices) {
      if (options_.shared_with_others(device, claim_uid)) {
        NVDRA_VLOG(4, "claim {}: GPU {} still in use by other claims, skipping partition {} deactivation", claim_uid,
                   device, id);
        return Status::Ok();
      }
    }
  }
  return options_.fabric->Deactivate(claim_uid, *undo.fabric_partition);
}

void GpuKind::StartFabricSweep(PeriodicWorkerOptions worker, UndoRecords undo_records) {
  if (options_.fabric == nullptr || fabric_sweep_ != nullptr) return;
  worker.run_at_start = true;
  fabric_sweep_ = std::make_unique<PeriodicWorker>(worker, [this, records = std::move(undo_records)]() -> Status {
    return SweepOrphanFabricPartitions(records).status();
  });
  fabric_sweep_->Start();
}

Result<int> GpuKind::SweepOrphanFabricPartitions(const UndoRecords& undo_records) {
  if (options_.fabric == nullptr) return 0;
  return options_.fabric->SweepOrphans([&]() -> Result<FabricPartitions::Owners> {
    NVDRA_ASSIGN_OR_RETURN(std::vector<nlohmann::json> records, undo_records());
    // Read leniently: a record this version cannot decode still owns the
    // partition it names. One imported from the Go driver's checkpoint, or
    // rebuilt from a CDI spec, may hold a partition it does not name (a
    // tombstone's record is null: it holds nothing).
    FabricPartitions::Owners owners;
    for (const auto& r : records) {
      if (!r.is_object()) continue;
      const bool foreign = r.contains("legacyCheckpoint") || r.contains("rebuilt");
      if (foreign && !r.contains("fabricPartition")) owners.unknown = true;
      if (!r.contains("fabricPartition")) continue;
      const auto& f = r["fabricPartition"];
      auto id = f.is_object() && f.contains("id") ? JsonAs<int>(f["id"], "id") : Result<int>(InvalidArgument("no id"));
      if (id.ok()) owners.ids.insert(*id);
    }
    return owners;
  });
}

}  // namespace nvdra::gpu
