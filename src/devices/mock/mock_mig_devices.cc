#include "devices/mock/mock_mig_devices.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "devices/mock/mock_device_lib.h"
#include "devices/nvcaps.h"
#include "util/file_util.h"

namespace nvdra::devices {

namespace {

using nlohmann::json;

std::string MigUuid(const std::string& parent, int gi, int serial) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : parent + "/" + std::to_string(gi) + "/" + std::to_string(serial)) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  char out[48];
  std::snprintf(out, sizeof out, "MIG-%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(h >> 32),
                static_cast<unsigned>((h >> 16) & 0xffff), static_cast<unsigned>(h & 0xffff),
                static_cast<unsigned>(serial & 0xffff), static_cast<unsigned long long>(h & 0xffffffffffffULL));
  return out;
}

json Encode(const MigInstance& m) {
  return {{"parentUUID", m.parent_uuid},
          {"giProfileId", m.gi_profile_id},
          {"ciProfileId", m.ci_profile_id},
          {"placementStart", m.placement_start},
          {"placementSize", m.placement_size},
          {"giId", m.gi_id},
          {"ciId", m.ci_id},
          {"uuid", m.uuid}};
}

MigInstance Decode(const json& j) {
  MigInstance m;
  m.parent_uuid = j.at("parentUUID").get<std::string>();
  m.gi_profile_id = j.at("giProfileId").get<int>();
  m.ci_profile_id = j.at("ciProfileId").get<int>();
  m.placement_start = j.at("placementStart").get<int>();
  m.placement_size = j.at("placementSize").get<int>();
  m.gi_id = j.at("giId").get<int>();
  m.ci_id = j.at("ciId").get<int>();
  m.uuid = j.at("uuid").get<std::string>();
  return m;
}

std::string CapFile(int minor) {
  return "DeviceFileMinor: " + std::to_string(minor) + "\nDeviceFileMode: 292\nDeviceFileModify: 1\n";
}

}  // namespace

MockMigDevices::MockMigDevices(std::string root, std::vector<GpuInfo> gpus)
    : root_(std::move(root)), gpus_(std::move(gpus)) {}

std::string MockMigDevices::state_path() const { return JoinPath(root_, "state/mig.json"); }

const GpuInfo* MockMigDevices::Gpu(const std::string& uuid) const {
  for (const auto& g : gpus_) {
    if (g.uuid == uuid) return &g;
  }
  return nullptr;
}

bool MockMigDevices::ModeOf(const State& s, const std::string& uuid, bool initial) {
  for (const auto& [u, on] : s.mig_mode) {
    if (u == uuid) return on;
  }
  return initial;
}

Result<MockMigDevices::State> MockMigDevices::Load() {
  State s;
  auto text = ReadFileToString(state_path());
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return s;
    return text.status();
  }
  try {
    json j = json::parse(*text);
    for (auto it = j["migMode"].begin(); it != j["migMode"].end(); ++it) {
      s.mig_mode.emplace_back(it.key(), it.value().get<bool>());
    }
    for (const auto& i : j["instances"]) s.instances.push_back(Decode(i));
    s.created = j.value("created", 0);
  } catch (const json::exception& e) {
    return DataLoss("mock MIG state " + state_path() + " is damaged: " + e.what());
  }
  return s;
}

Status MockMigDevices::Save(const State& s) {
  json j = {{"migMode", json::object()}, {"instances", json::array()}, {"created", s.created}};
  for (const auto& [u, on] : s.mig_mode) j["migMode"][u] = on;
  for (const auto& i : s.instances) j["instances"].push_back(Encode(i));
  return WriteFileAtomically(state_path(), j.dump(1) + "\n", 0644, false);
}

Status MockMigDevices::WriteCaps(int minor, int gi, int ci) const {
  const std::string caps = JoinPath(root_, kCapabilitiesDir);
  int gi_minor = MockDeviceLib::MigGiCapMinor(minor, gi), ci_minor = MockDeviceLib::MigCiCapMinor(minor, gi, ci);
  std::string ci_path = JoinPath(caps, MigCiAccessPath(minor, gi, ci));
  NVDRA_RETURN_IF_ERROR(MakeDirectories(ci_path.substr(0, ci_path.rfind('/')), 0755));
  NVDRA_RETURN_IF_ERROR(WriteFileAtomically(JoinPath(caps, MigGiAccessPath(minor, gi)), CapFile(gi_minor), 0444,
                                            false));
  NVDRA_RETURN_IF_ERROR(WriteFileAtomically(ci_path, CapFile(ci_minor), 0444, false));
  for (int m : {gi_minor, ci_minor}) {
    NVDRA_RETURN_IF_ERROR(WriteFileAtomically(JoinPath(root_, "dev/nvidia-caps/nvidia-cap" + std::to_string(m)), "",
                                              0444, false));
  }
  return Status::Ok();
}

void MockMigDevices::RemoveCaps(int minor, int gi, int ci) const {
  const std::string caps = JoinPath(root_, kCapabilitiesDir);
  (void)RemoveFileIfExists(JoinPath(caps, MigCiAccessPath(minor, gi, ci)));
  (void)RemoveFileIfExists(JoinPath(caps, MigGiAccessPath(minor, gi)));
  (void)RemoveFileIfExists(JoinPath(root_, "dev/nvidia-caps/nvidia-cap" +
                                               std::to_string(MockDeviceLib::MigCiCapMinor(minor, gi, ci))));
  (void)RemoveFileIfExists(JoinPath(root_, "dev/nvidia-caps/nvidia-cap" +
                                               std::to_string(MockDeviceLib::MigGiCapMinor(minor, gi))));
}

Result<bool> MockMigDevices::MigModeEnabled(const std::string& uuid) {
  const GpuInfo* g = Gpu(uuid);
  if (g == nullptr) return NotFound("no GPU with UUID " + uuid + " on this (mock) node");
  MutexLock l(mu_);
  NVDRA_ASSIGN_OR_RETURN(State s, Load());
  return ModeOf(s, uuid, g->mig_enabled);
}

Status MockMigDevices::SetMigMode(const std::string& uuid, bool enabled) {
  const GpuInfo* g = Gpu(uuid);
  if (g == nullptr) return NotFound("no GPU with UUID " + uuid + " on this (mock) node");
  if (g->mig_profiles.empty()) return FailedPrecondition("GPU " + uuid + " does not support MIG");
  MutexLock l(mu_);
  NVDRA_ASSIGN_OR_RETURN(State s, Load());
  bool has = std::any_of(s.instances.begin(), s.instances.end(), [&](const auto& i) { return i.parent_uuid == uuid; });
  if (!enabled && has) return FailedPrecondition("GPU " + uuid + " still has MIG devices: MIG mode stays on");
  std::erase_if(s.mig_mode, [&](const auto& p) { return p.first == uuid; });
  s.mig_mode.emplace_back(uuid, enabled);
  std::sort(s.mig_mode.begin(), s.mig_mode.end());
  return Save(s);
}

Result<std::vector<MigInstance>> MockMigDevices::List(const std::string& uuid) {
  if (Gpu(uuid) == nullptr) return NotFound("no GPU with UUID " + uuid + " on this (mock) node");
  MutexLock l(mu_);
  NVDRA_ASSIGN_OR_RETURN(State s, Load());
  std::vector<MigInstance> out;
  for (const auto& i : s.instances) {
    if (i.parent_uuid == uuid) out.push_back(i);
  }
  return out;
}

Result<MigInstance> MockMigDevices::Create(const std::string& uuid, int gi_profile_id, int ci_profile_id,
                                           int placement_start) {
  const GpuInfo* g = Gpu(uuid);
  if (g == nullptr) return NotFound("no GPU with UUID " + uuid + " on this (mock) node");
  const MigProfileInfo* profile = nullptr;
  for (const auto& p : g->mig_profiles) {
    if (p.gi_profile_id == gi_profile_id) profile = &p;
  }
  if (profile == nullptr)
    return InvalidArgument("GPU " + uuid + " has no GPU instance profile " + std::to_string(gi_profile_id));
  auto placement = std::find_if(profile->placements.begin(), profile->placements.end(),
                                [&](const MigPlacement& p) { return p.start == placement_start; });
  if (placement == profile->placements.end()) {
    return InvalidArgument("profile " + profile->profile + " cannot be placed at " + std::to_string(placement_start));
  }
  MutexLock l(mu_);
  NVDRA_ASSIGN_OR_RETURN(State s, Load());
  if (!ModeOf(s, uuid, g->mig_enabled)) return FailedPrecondition("MIG mode is disabled on GPU " + uuid);
  std::vector<int> used;
  for (const auto& i : s.instances) {
    if (i.parent_uuid != uuid) continue;
    used.push_back(i.gi_id);
    if (i.placement_start < placement->start + placement->size &&
        placement->start < i.placement_start + i.placement_size) {
      return AlreadyExists("placement " + std::to_string(placement_start) + " of GPU " + uuid +
                           " overlaps GPU instance " + std::to_string(i.gi_id));
    }
  }
  MigInstance m{uuid, gi_profile_id, ci_profile_id, placement->start, placement->size, 1, 0, ""};
  while (std::find(used.begin(), used.end(), m.gi_id) != used.end()) ++m.gi_id;
  m.uuid = MigUuid(uuid, m.gi_id, ++s.created);
  NVDRA_RETURN_IF_ERROR(WriteCaps(g->minor, m.gi_id, m.ci_id));
  s.instances.push_back(m);
  NVDRA_RETURN_IF_ERROR(Save(s));
  return m;
}

Status MockMigDevices::Destroy(const std::string& uuid, int gi_id, int ci_id) {
  const GpuInfo* g = Gpu(uuid);
  if (g == nullptr) return NotFound("no GPU with UUID " + uuid + " on this (mock) node");
  MutexLock l(mu_);
  NVDRA_ASSIGN_OR_RETURN(State s, Load());
  auto it = std::find_if(s.instances.begin(), s.instances.end(),
                         [&](const MigInstance& i) { return i.parent_uuid == uuid && i.gi_id == gi_id; });
  if (it == s.instances.end()) return NotFound("GPU " + uuid + " has no GPU instance " + std::to_string(gi_id));
  if (it->ci_id != ci_id)
    return NotFound("GPU instance " + std::to_string(gi_id) + " has no compute instance " + std::to_string(ci_id));
  s.instances.erase(it);
  NVDRA_RETURN_IF_ERROR(Save(s));
  RemoveCaps(g->minor, gi_id, ci_id);
  return Status::Ok();
}

Status MockMigDevices::Overlay(NodeInventory& inventory) {
  MutexLock l(mu_);
  NVDRA_ASSIGN_OR_RETURN(State s, Load());
  for (auto& g : inventory.gpus) {
    g.mig_enabled = ModeOf(s, g.uuid, g.mig_enabled);
    for (const auto& i : s.instances) {
      if (i.parent_uuid != g.uuid) continue;
      MigDeviceInfo m;
      m.parent_minor = g.minor;
      m.parent_uuid = g.uuid;
      m.uuid = i.uuid;
      m.gi_profile_id = i.gi_profile_id;
      m.ci_profile_id = i.ci_profile_id;
      m.gi_id = i.gi_id;
      m.ci_id = i.ci_id;
      m.placement_start = i.placement_start;
      m.placement_size = i.placement_size;
      for (const auto& p : g.mig_profiles) {
        if (p.gi_profile_id != i.gi_profile_id) continue;
        m.profile = p.profile;
        m.multiprocessors = p.multiprocessors;
        m.copy_engines = p.copy_engines;
        m.decoders = p.decoders;
        m.encoders = p.encoders;
        m.jpeg_engines = p.jpeg_engines;
        m.ofa_engines = p.ofa_engines;
        m.memory_bytes = p.memory_bytes;
      }
      g.migs.push_back(std::move(m));
    }
  }
  return Status::Ok();
}

}  // namespace nvdra::devices
