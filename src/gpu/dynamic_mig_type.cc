#include "gpu/dynamic_mig_type.h"

#include <algorithm>
#include <set>

#include "devices/device_names.h"
#include "gpu/gpu_device_types.h"
#include "gpu/gpu_published_devices.h"
#include "gpu/mig_counters.h"
#include "gpu/mig_edits.h"
#include "util/failpoint.h"
#include "util/log.h"

namespace nvdra::gpu {

namespace {

bool SamePlacement(const devices::MigInstance& i, const MigDeviceUndo& m) {
  return i.gi_profile_id == m.gi_profile_id && i.placement_start == m.placement_start;
}

std::string PlacementName(const MigDeviceUndo& m) {
  return m.device + " (GPU " + m.parent_uuid + ", GPU instance profile " + std::to_string(m.gi_profile_id) +
         " at placement " + std::to_string(m.placement_start) + ")";
}

}  // namespace

std::string_view DynamicMigType::name() const { return kDeviceTypeMig; }

std::vector<GpuDevice> DynamicMigType::Devices(const devices::NodeInventory& inventory) const {
  std::vector<GpuDevice> out;
  for (const auto& g : inventory.gpus) {
    if (!devices::DynamicMigCapable(g)) continue;
    for (const auto& p : g.mig_profiles) {
      for (const auto& pl : p.placements) {
        GpuDevice d;
        d.name = devices::GpuDeviceName(g.minor) + "-mig-" + devices::CanonicalMigProfile(p.profile) + "-" +
                 std::to_string(p.gi_profile_id) + "-" + std::to_string(pl.start);
        d.gpu = &g;
        d.type = this;
        d.partition = true;
        d.detail = std::make_shared<const DynamicMigPlacement>(p, pl);
        out.push_back(std::move(d));
      }
    }
  }
  return out;
}

model::PublishedDevice DynamicMigType::Publish(const GpuDevice& device) const {
  const devices::GpuInfo& g = *device.gpu;
  model::PublishedDevice d;
  d.name = device.name;
  d.attributes["type"] = std::string(name());
  d.attributes["parentUUID"] = g.uuid;
  const DynamicMigPlacement& at = DetailOf<DynamicMigPlacement>(device);
  d.attributes["profile"] = at.profile.profile;
  PutCommonGpuAttributes(d, g);
  d.capacity = MigProfileCapacities(at.profile);
  d.consumes_counters.push_back(Consumption(g, d.capacity, at.placement.start, at.placement.size));
  d.counter_sets.push_back(GpuCounterSet(g));
  return d;
}

std::vector<std::string> DynamicMigType::Held(const GpuDevice& device) const {
  std::vector<std::string> out = {device.name};
  const devices::MigPlacement& pl = DetailOf<DynamicMigPlacement>(device).placement;
  for (int i = pl.start; i < pl.start + pl.size; ++i) {
    out.push_back(MemorySliceResource(device.gpu->minor, i));
  }
  return out;
}

Result<cdi::ContainerEdits> DynamicMigType::Edits(const GpuDevice& device, const GpuContainerEdits&) const {
  return FailedPrecondition("MIG device " + device.name + " is created at Prepare: its edits need the claim's record");
}

Result<cdi::ContainerEdits> DynamicMigType::Edits(const GpuDevice& device, const GpuUndo& undo,
                                                  const GpuContainerEdits& edits) const {
  for (const auto& m : undo.Of<MigUndo>().devices) {
    if (m.device != device.name) continue;
    if (!m.gi_id || !m.ci_id) return FailedPrecondition("MIG device " + PlacementName(m) + " was not created");
    devices::MigDeviceInfo info;
    info.parent_minor = m.parent_minor;
    info.parent_uuid = m.parent_uuid;
    info.uuid = m.uuid;
    info.gi_id = *m.gi_id;
    info.ci_id = *m.ci_id;
    return MigEdits(edits, info, device.gpu);
  }
  return NotFound("the claim's record names no MIG device " + device.name);
}

Status DynamicMigType::Plan(const std::vector<const GpuDevice*>& devices, GpuUndo& undo) const {
  for (const GpuDevice* d : devices) {
    MigDeviceUndo m;
    m.device = d->name;
    m.parent_uuid = d->gpu->uuid;
    m.parent_minor = d->gpu->minor;
    const DynamicMigPlacement& at = DetailOf<DynamicMigPlacement>(*d);
    m.profile = at.profile.profile;
    m.gi_profile_id = at.profile.gi_profile_id;
    m.ci_profile_id = at.profile.ci_profile_id;
    m.placement_start = at.placement.start;
    m.placement_size = at.placement.size;
    undo.Get<MigUndo>().devices.push_back(std::move(m));
  }
  return Status::Ok();
}

Status DynamicMigType::ApplyOne(MigDeviceUndo& m) {
  NVDRA_ASSIGN_OR_RETURN(auto existing, control_->ListMigInstances(m.parent_uuid));
  for (const auto& i : existing) {
    if (!SamePlacement(i, m)) continue;
    if (i.uuid.empty()) {
      // A GPU instance without its compute instance: a creation cut short.
      // It is destroyed and the MIG device created anew.
      NVDRA_RETURN_IF_ERROR(control_->DestroyMigInstance(m.parent_uuid, i.gi_id, i.ci_id)
                                .Wrap("destroy the incomplete MIG device " + PlacementName(m)));
      NVDRA_WARN("Destroyed GPU instance {} of {}: it had no compute instance", i.gi_id, m.device);
      break;
    }
    m.gi_id = i.gi_id;
    m.ci_id = i.ci_id;
    m.uuid = i.uuid;
    return Status::Ok();
  }
  NVDRA_ASSIGN_OR_RETURN(bool enabled, control_->MigModeEnabled(m.parent_uuid));
  if (!enabled) {
    NVDRA_RETURN_IF_ERROR(control_->SetMigMode(m.parent_uuid, true).Wrap("enable MIG mode on GPU " + m.parent_uuid));
    NVDRA_INFO("Enabled MIG mode on GPU {} for {}", m.parent_uuid, m.device);
  }
  auto created = control_->CreateMigInstance(m.parent_uuid, m.gi_profile_id, m.ci_profile_id, m.placement_start);
  if (!created.ok()) return created.status().Wrap("create MIG device " + PlacementName(m));
  // A crash here leaves a MIG device the record names only by placement.
  NVDRA_RETURN_IF_ERROR(NVDRA_FAILPOINT("dynamic-mig-after-create"));
  m.gi_id = created->gi_id;
  m.ci_id = created->ci_id;
  m.uuid = created->uuid;
  NVDRA_INFO("Created MIG device {} ({}, GPU instance {}, compute instance {})", m.device, m.uuid, *m.gi_id, *m.ci_id);
  return Status::Ok();
}

Status DynamicMigType::CheckWired() const {
  if (control_ == nullptr || inventory_ == nullptr) return Internal("dynamic MIG has no device control");
  return Status::Ok();
}

Status DynamicMigType::Apply(GpuUndo& undo) {
  if (!undo.Of<MigUndo>().devices.empty()) NVDRA_RETURN_IF_ERROR(CheckWired());
  for (auto& m : undo.Get<MigUndo>().devices) NVDRA_RETURN_IF_ERROR(ApplyOne(m));
  return Status::Ok();
}

const devices::GpuInfo* DynamicMigType::Gpu(const std::string& uuid) const {
  for (const auto& g : inventory_->gpus) {
    if (g.uuid == uuid) return &g;
  }
  return nullptr;
}

Status DynamicMigType::UndoOne(const MigDeviceUndo& m) {
  NVDRA_ASSIGN_OR_RETURN(auto existing, control_->ListMigInstances(m.parent_uuid));
  for (const auto& i : existing) {
    if (!SamePlacement(i, m)) continue;
    NVDRA_RETURN_IF_ERROR(
        control_->DestroyMigInstance(m.parent_uuid, i.gi_id, i.ci_id).Wrap("destroy MIG device " + PlacementName(m)));
    NVDRA_INFO("Destroyed MIG device {} ({})", m.device, i.uuid);
  }
  NVDRA_ASSIGN_OR_RETURN(auto left, control_->ListMigInstances(m.parent_uuid));
  const devices::GpuInfo* g = Gpu(m.parent_uuid);
  // As upstream: MIG mode goes off with the last MIG device, unless the GPU
  // would need a reset to leave it (Ampere).
  if (!left.empty() || g == nullptr || !devices::SupportsMigModeToggle(*g)) return Status::Ok();
  NVDRA_ASSIGN_OR_RETURN(bool enabled, control_->MigModeEnabled(m.parent_uuid));
  if (!enabled) return Status::Ok();
  NVDRA_RETURN_IF_ERROR(control_->SetMigMode(m.parent_uuid, false).Wrap("disable MIG mode on GPU " + m.parent_uuid));
  NVDRA_INFO("Disabled MIG mode on GPU {}: no MIG device is left", m.parent_uuid);
  return Status::Ok();
}

Status DynamicMigType::Undo(const std::string& claim_uid, const GpuUndo& undo) {
  if (!undo.Of<MigUndo>().devices.empty()) NVDRA_RETURN_IF_ERROR(CheckWired());
  Status first;
  for (const auto& m : undo.Of<MigUndo>().devices) {
    Status s = UndoOne(m);
    if (!s.ok() && first.ok()) first = s;
  }
  for (const auto& raw : undo.Of<MigUndo>().unreadable) {
    NVDRA_WARN("claim {}: skipping a MIG item of its undo record this version cannot read: {}", claim_uid, raw.dump());
  }
  return first;
}

Result<int> DynamicMigType::SweepOrphans(const UndoRecords& undo_records, bool disable_idle_mig_mode) {
  NVDRA_RETURN_IF_ERROR(CheckWired());
  std::vector<devices::MigInstance> found;
  for (const auto& g : inventory_->gpus) {
    if (!devices::DynamicMigCapable(g)) continue;
    NVDRA_ASSIGN_OR_RETURN(auto list, control_->ListMigInstances(g.uuid));
    found.insert(found.end(), list.begin(), list.end());
  }
  if (found.empty() && !disable_idle_mig_mode) return 0;
  // Read after the listing: a claim recorded meanwhile owns what it creates.
  NVDRA_ASSIGN_OR_RETURN(std::vector<GpuUndo> records, undo_records());
  int destroyed = 0;
  std::set<std::string> in_use;  // GPUs with a MIG device that stays, or a record naming them
  for (const auto& r : records) {
    for (const auto& m : r.Of<MigUndo>().devices) in_use.insert(m.parent_uuid);
  }
  for (const auto& i : found) {
    bool owned = false;
    for (const auto& r : records) {
      for (const auto& m : r.Of<MigUndo>().devices) {
        owned = owned || (m.parent_uuid == i.parent_uuid && SamePlacement(i, m));
      }
    }
    if (owned) {
      in_use.insert(i.parent_uuid);
      continue;
    }
    NVDRA_RETURN_IF_ERROR(control_->DestroyMigInstance(i.parent_uuid, i.gi_id, i.ci_id)
                              .Wrap("destroy MIG device " + (i.uuid.empty() ? "(no compute instance)" : i.uuid) +
                                    " that no claim owns"));
    NVDRA_WARN("Destroyed MIG device {} on GPU {} (GPU instance {} at placement {}): no claim owns it",
               i.uuid.empty() ? "(no compute instance)" : i.uuid, i.parent_uuid, i.gi_id, i.placement_start);
    ++destroyed;
  }
  if (!disable_idle_mig_mode) return destroyed;
  // As upstream at start: a GPU that toggles MIG mode without a reset and
  // has no MIG device leaves MIG mode, so that its full GPU is one.
  for (const auto& g : inventory_->gpus) {
    if (!devices::DynamicMigCapable(g) || !devices::SupportsMigModeToggle(g) || in_use.contains(g.uuid)) continue;
    NVDRA_ASSIGN_OR_RETURN(bool enabled, control_->MigModeEnabled(g.uuid));
    if (!enabled) continue;
    NVDRA_RETURN_IF_ERROR(control_->SetMigMode(g.uuid, false).Wrap("disable MIG mode on GPU " + g.uuid));
    NVDRA_INFO("Disabled MIG mode on GPU {}: no MIG device is on it", g.uuid);
  }
  return destroyed;
}

namespace {

class DynamicMigDecoration final : public FullGpuDecoration {
 public:
  bool Withholds(const devices::GpuInfo& g) const override {
    return g.mig_enabled && !(devices::DynamicMigCapable(g) && devices::SupportsMigModeToggle(g));
  }
  void AddHeld(const GpuDevice& device, std::vector<std::string>& held) const override {
    if (!devices::DynamicMigCapable(*device.gpu)) return;
    for (int i = 0; i < devices::MemorySliceCount(*device.gpu); ++i) {
      held.push_back(MemorySliceResource(device.gpu->minor, i));
    }
  }
  void Decorate(const GpuDevice& device, model::PublishedDevice& d) const override {
    const devices::GpuInfo& g = *device.gpu;
    if (!devices::DynamicMigCapable(g)) return;
    d.capacity = MaxMigCapacities(g);
    d.counter_sets.push_back(GpuCounterSet(g));
    d.consumes_counters.push_back(Consumption(g, d.capacity, 0, devices::MemorySliceCount(g)));
  }
  using FullGpuDecoration::Decorate;
};

}  // namespace

std::shared_ptr<const FullGpuDecoration> DynamicMigGpuDecoration() { return std::make_shared<DynamicMigDecoration>(); }

}  // namespace nvdra::gpu
