#include "gpu/gpu_undo.h"

#include "util/json_reader.h"

namespace nvdra::gpu {

using nlohmann::json;

namespace {

constexpr const char* kWhat = "GPU undo record";

// nullopt: an item this version cannot read (not an object, no uuid, a field
// of the wrong type, an interval outside int's range, which cannot be one
// this version wrote).
std::optional<TimeSliceUndo> DecodeTimeSlice(const JsonReader& item) {
  auto uuid = item.Required<std::string>("uuid");
  auto device = item.OptionalOr<std::string>("device", "");
  auto interval = item.OptionalOr<int>("interval", 0);
  if (!uuid.ok() || !device.ok() || !interval.ok()) return std::nullopt;
  TimeSliceUndo t;
  t.uuid = *uuid;
  t.device = *device;
  t.interval = *interval;
  t.unknown = item.Unknown({"device", "uuid", "interval"});
  return t;
}

std::optional<MpsDaemonUndo> DecodeMps(const JsonReader& item) {
  MpsDaemonUndo m;
  auto id = item.Required<std::string>("id");
  auto ns = item.Required<std::string>("namespace");
  auto deployment = item.Required<std::string>("deployment");
  auto root = item.Required<std::string>("root");
  auto uuids = item.OptionalOr<std::vector<std::string>>("uuids", {});
  auto exclusive = item.OptionalOr<std::vector<std::string>>("exclusiveProcess", {});
  auto threads = item.Optional<int64_t>("activeThreadPercentage");
  auto limits = item.OptionalOr<json>("pinnedLimits", json::object());
  auto multi = item.OptionalOr<bool>("multiUser", false);
  if (!id.ok() || !ns.ok() || !deployment.ok() || !root.ok() || !uuids.ok() || !exclusive.ok() || !threads.ok() ||
      !limits.ok() || !multi.ok()) {
    return std::nullopt;
  }
  m.id = *id;
  m.ns = *ns;
  m.deployment = *deployment;
  m.root = *root;
  m.uuids = *uuids;
  m.exclusive_process = *exclusive;
  m.active_thread_percentage = *threads;
  if (!limits->is_object()) return std::nullopt;
  for (const auto& [uuid, limit] : limits->items()) {
    if (!limit.is_string()) return std::nullopt;
    m.pinned_limits[uuid] = limit.get<std::string>();
  }
  m.multi_user = *multi;
  m.unknown = item.Unknown({"id", "namespace", "deployment", "root", "uuids", "exclusiveProcess",
                            "activeThreadPercentage", "pinnedLimits", "multiUser"});
  return m;
}

json EncodeMps(const MpsDaemonUndo& m) {
  json item = {{"id", m.id},       {"namespace", m.ns},          {"deployment", m.deployment},
               {"root", m.root},   {"uuids", m.uuids},           {"exclusiveProcess", m.exclusive_process},
               {"multiUser", m.multi_user}, {"pinnedLimits", m.pinned_limits}};
  if (m.active_thread_percentage) item["activeThreadPercentage"] = *m.active_thread_percentage;
  MergeUnknownMembers(item, m.unknown);
  return item;
}

std::optional<MigDeviceUndo> DecodeMig(const JsonReader& item) {
  MigDeviceUndo m;
  auto device = item.Required<std::string>("device");
  auto parent = item.Required<std::string>("parentUUID");
  auto minor = item.Required<int>("parentMinor");
  auto profile = item.OptionalOr<std::string>("profile", "");
  auto gip = item.Required<int>("giProfileId");
  auto cip = item.Required<int>("ciProfileId");
  auto start = item.Required<int>("placementStart");
  auto size = item.Required<int>("placementSize");
  auto gi = item.Optional<int>("giId");
  auto ci = item.Optional<int>("ciId");
  auto uuid = item.OptionalOr<std::string>("uuid", "");
  if (!device.ok() || !parent.ok() || !minor.ok() || !profile.ok() || !gip.ok() || !cip.ok() || !start.ok() ||
      !size.ok() || !gi.ok() || !ci.ok() || !uuid.ok()) {
    return std::nullopt;
  }
  m.device = *device;
  m.parent_uuid = *parent;
  m.parent_minor = *minor;
  m.profile = *profile;
  m.gi_profile_id = *gip;
  m.ci_profile_id = *cip;
  m.placement_start = *start;
  m.placement_size = *size;
  m.gi_id = *gi;
  m.ci_id = *ci;
  m.uuid = *uuid;
  m.unknown = item.Unknown({"device", "parentUUID", "parentMinor", "profile", "giProfileId", "ciProfileId",
                            "placementStart", "placementSize", "giId", "ciId", "uuid"});
  return m;
}

json EncodeMig(const MigDeviceUndo& m) {
  json item = {{"device", m.device},
               {"parentUUID", m.parent_uuid},
               {"parentMinor", m.parent_minor},
               {"profile", m.profile},
               {"giProfileId", m.gi_profile_id},
               {"ciProfileId", m.ci_profile_id},
               {"placementStart", m.placement_start},
               {"placementSize", m.placement_size}};
  if (m.gi_id) item["giId"] = *m.gi_id;
  if (m.ci_id) item["ciId"] = *m.ci_id;
  if (!m.uuid.empty()) item["uuid"] = m.uuid;
  MergeUnknownMembers(item, m.unknown);
  return item;
}

std::optional<VfioUndo> DecodeVfio(const JsonReader& item) {
  VfioUndo v;
  auto device = item.Required<std::string>("device");
  auto bus = item.Required<std::string>("pciBusID");
  auto group = item.Optional<int>("iommuGroup");
  auto fd = item.OptionalOr<bool>("preferIommuFD", false);
  auto api = item.OptionalOr<bool>("enableAPIDevice", false);
  auto uuid = item.OptionalOr<std::string>("gpuUUID", "");
  auto minor = item.Optional<int>("gpuMinor");
  auto persistence = item.OptionalOr<bool>("restorePersistenceMode", false);
  if (!device.ok() || !bus.ok() || !group.ok() || !fd.ok() || !api.ok() || bus->empty()) return std::nullopt;
  if (!uuid.ok() || !minor.ok() || !persistence.ok()) return std::nullopt;
  v.gpu_uuid = *uuid;
  v.gpu_minor = *minor;
  v.restore_persistence = *persistence;
  v.device = *device;
  v.pci_bus_id = *bus;
  v.iommu_group = *group;
  v.prefer_iommufd = *fd;
  v.enable_api_device = *api;
  v.unknown = item.Unknown({"device", "pciBusID", "iommuGroup", "preferIommuFD", "enableAPIDevice", "gpuUUID",
                            "gpuMinor", "restorePersistenceMode"});
  return v;
}

json EncodeVfio(const VfioUndo& v) {
  json item = {{"device", v.device},
               {"pciBusID", v.pci_bus_id},
               {"preferIommuFD", v.prefer_iommufd},
               {"enableAPIDevice", v.enable_api_device}};
  if (v.iommu_group) item["iommuGroup"] = *v.iommu_group;
  if (!v.gpu_uuid.empty()) item["gpuUUID"] = v.gpu_uuid;
  if (v.gpu_minor) item["gpuMinor"] = *v.gpu_minor;
  if (v.restore_persistence) item["restorePersistenceMode"] = true;
  MergeUnknownMembers(item, v.unknown);
  return item;
}

std::optional<FabricPartitionUndo> DecodeFabricPartition(const JsonReader& item) {
  if (!item.value().is_object()) return std::nullopt;
  auto id = item.Required<int>("id");
  auto modules = item.OptionalOr<json>("gpuModuleIDs", json::array());
  if (!id.ok() || !modules.ok() || !modules->is_array()) return std::nullopt;
  FabricPartitionUndo f;
  f.id = *id;
  // A module id past int's range cannot be one this version wrote: the
  // item is kept verbatim instead of coming back as another number.
  for (const auto& m : *modules) {
    auto id_of = JsonAs<int>(m, "gpuModuleIDs");
    if (!id_of.ok()) return std::nullopt;
    f.module_ids.push_back(*id_of);
  }
  f.unknown = item.Unknown({"id", "gpuModuleIDs"});
  return f;
}

Status DecodeInto(const JsonReader& r, GpuUndo& out) {
  NVDRA_RETURN_IF_ERROR(r.ExpectObject());
  NVDRA_ASSIGN_OR_RETURN(out.version, r.OptionalOr<int64_t>("version", kGpuUndoVersion));
  NVDRA_ASSIGN_OR_RETURN(out.devices, r.OptionalOr<std::vector<std::string>>("devices", {}));
  NVDRA_RETURN_IF_ERROR(r.ForEach("timeSlicing", [&](const JsonReader& item) {
    if (auto t = DecodeTimeSlice(item)) {
      out.time_slicing.push_back(std::move(*t));
    } else {
      out.unreadable_time_slicing.push_back(item.value());
    }
    return Status::Ok();
  }));
  // A newer version's "mps" of another shape is kept as it is, unread.
  const bool mps_list = !r.value().contains("mps") || r.value()["mps"].is_array() || r.value()["mps"].is_null();
  if (mps_list) NVDRA_RETURN_IF_ERROR(r.ForEach("mps", [&](const JsonReader& item) {
    if (auto m = DecodeMps(item)) {
      out.mps.push_back(std::move(*m));
    } else {
      out.unreadable_mps.push_back(item.value());
    }
    return Status::Ok();
  }));
  const bool mig_list = !r.value().contains("mig") || r.value()["mig"].is_array() || r.value()["mig"].is_null();
  if (mig_list) NVDRA_RETURN_IF_ERROR(r.ForEach("mig", [&](const JsonReader& item) {
    if (auto m = DecodeMig(item)) {
      out.mig.push_back(std::move(*m));
    } else {
      out.unreadable_mig.push_back(item.value());
    }
    return Status::Ok();
  }));
  const bool vfio_list = !r.value().contains("vfio") || r.value()["vfio"].is_array() || r.value()["vfio"].is_null();
  if (vfio_list) NVDRA_RETURN_IF_ERROR(r.ForEach("vfio", [&](const JsonReader& item) {
    if (auto v = DecodeVfio(item)) {
      out.vfio.push_back(std::move(*v));
    } else {
      out.unreadable_vfio.push_back(item.value());
    }
    return Status::Ok();
  }));
  out.unknown = r.Unknown({"version", "devices", "timeSlicing", "mps", "mig", "vfio", "fabricPartition"});
  if (r.value().contains("fabricPartition") && !r.value().at("fabricPartition").is_null()) {
    out.fabric_partition = DecodeFabricPartition(JsonReader(r.value().at("fabricPartition")));
    // One this version cannot read stays among the unknown fields, verbatim.
    if (!out.fabric_partition) out.unknown["fabricPartition"] = r.value().at("fabricPartition");
  }
  // A list of another shape is kept as it is, unread.
  for (auto [key, list] : {std::pair{"mps", mps_list}, std::pair{"mig", mig_list}, std::pair{"vfio", vfio_list}}) {
    if (!list) out.unknown[key] = r.value()[key];
  }
  return Status::Ok();
}

}  // namespace

json EncodeGpuUndo(const GpuUndo& undo) {
  json ts = json::array();
  for (const auto& t : undo.time_slicing) {
    json item = {{"device", t.device}, {"uuid", t.uuid}, {"interval", t.interval}};
    MergeUnknownMembers(item, t.unknown);
    ts.push_back(std::move(item));
  }
  for (const auto& raw : undo.unreadable_time_slicing) ts.push_back(raw);
  json j = {{"version", undo.version}, {"devices", undo.devices}, {"timeSlicing", std::move(ts)}};
  if (!undo.mps.empty() || !undo.unreadable_mps.empty()) {
    json mps = json::array();
    for (const auto& m : undo.mps) mps.push_back(EncodeMps(m));
    for (const auto& raw : undo.unreadable_mps) mps.push_back(raw);
    j["mps"] = std::move(mps);
  }
  if (!undo.mig.empty() || !undo.unreadable_mig.empty()) {
    json mig = json::array();
    for (const auto& m : undo.mig) mig.push_back(EncodeMig(m));
    for (const auto& raw : undo.unreadable_mig) mig.push_back(raw);
    j["mig"] = std::move(mig);
  }
  if (!undo.vfio.empty() || !undo.unreadable_vfio.empty()) {
    json vfio = json::array();
    for (const auto& v : undo.vfio) vfio.push_back(EncodeVfio(v));
    for (const auto& raw : undo.unreadable_vfio) vfio.push_back(raw);
    j["vfio"] = std::move(vfio);
  }
  if (undo.fabric_partition) {
    json f = {{"id", undo.fabric_partition->id}, {"gpuModuleIDs", undo.fabric_partition->module_ids}};
    MergeUnknownMembers(f, undo.fabric_partition->unknown);
    j["fabricPartition"] = std::move(f);
  }
  MergeUnknownMembers(j, undo.unknown);
  return j;
}

Result<GpuUndo> DecodeGpuUndo(const json& j) {
  GpuUndo out;
  if (j.is_null()) return out;
  NVDRA_RETURN_IF_ERROR(DecodeInto(JsonReader(j), out).Wrap(kWhat));
  return out;
}

}  // namespace nvdra::gpu
