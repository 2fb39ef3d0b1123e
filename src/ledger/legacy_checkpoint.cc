#include "ledger/legacy_checkpoint.h"

#include <algorithm>
#include <cctype>

#include "util/uid.h"

namespace nvdra::ledger {
namespace {

using nlohmann::json;

// Go's encoding/json matches keys case-insensitively; the oldest files used
// protobuf-style snake_case names.
const json* Field(const json& obj, std::initializer_list<const char*> names) {
  if (!obj.is_object()) return nullptr;
  for (const char* n : names) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      const std::string& k = it.key();
      if (k.size() == std::char_traits<char>::length(n) &&
          std::equal(k.begin(), k.end(), n, [](char a, char b) {
            return std::tolower(static_cast<unsigned char>(a)) ==
                   std::tolower(static_cast<unsigned char>(b));
          })) {
        return &it.value();
      }
    }
  }
  return nullptr;
}

std::string Str(const json& obj, std::initializer_list<const char*> names) {
  const json* v = Field(obj, names);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

std::vector<std::string> StrList(const json& obj, std::initializer_list<const char*> names) {
  std::vector<std::string> out;
  const json* v = Field(obj, names);
  if (v == nullptr || !v->is_array()) return out;
  for (const auto& s : *v) {
    if (s.is_string()) out.push_back(s.get<std::string>());
  }
  return out;
}

PreparedDevice FromCheckpointedDevice(const json& d) {
  PreparedDevice p;
  p.requests = StrList(d, {"Requests", "request_names"});
  p.pool = Str(d, {"PoolName", "pool_name"});
  p.device = Str(d, {"DeviceName", "device_name"});
  p.cdi_device_ids = StrList(d, {"CDIDeviceIDs", "cdi_device_ids"});
  p.share_id = Str(d, {"ShareID"});
  return p;
}

// A group is {"devices":[{"gpu":{...,"device":D}|null, "mig":..., ...}]}; the
// oldest CD files put the CheckpointedDevice fields directly in the entry.
void CollectPrepared(const json& groups, std::vector<PreparedDevice>& out) {
  if (!groups.is_array()) return;
  for (const auto& g : groups) {
    const json* devices = Field(g, {"devices"});
    if (devices == nullptr || !devices->is_array()) continue;
    for (const auto& dev : *devices) {
      if (!dev.is_object()) continue;
      if (Field(dev, {"DeviceName", "device_name"}) != nullptr) {
        out.push_back(FromCheckpointedDevice(dev));
        continue;
      }
      for (auto it = dev.begin(); it != dev.end(); ++it) {
        const json* inner = Field(it.value(), {"device"});
        if (inner != nullptr && inner->is_object()) out.push_back(FromCheckpointedDevice(*inner));
      }
    }
  }
}

}  // namespace

Result<LegacyImport> ParseLegacyCheckpoint(std::string_view json_text,
                                           const std::string& driver_name,
                                           const std::string& current_boot_id) {
  json doc = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return DataLoss("the Go driver's checkpoint is not a JSON object");
  }
  LegacyImport out;
  const json* v2 = Field(doc, {"v2"});
  const json* v1 = Field(doc, {"v1"});
  const json* claims = nullptr;
  bool have_states = false;
  if (v2 != nullptr && v2->is_object()) {
    out.node_boot_id = Str(*v2, {"nodeBootID"});
    claims = Field(*v2, {"preparedClaims"});
    have_states = true;
  }
  if ((claims == nullptr || !claims->is_object()) && v1 != nullptr) {
    claims = Field(*v1, {"preparedClaims"});
    have_states = false;  // v1 recorded completed claims only
  }
  if (claims == nullptr || !claims->is_object()) return out;
  for (auto it = claims->begin(); it != claims->end(); ++it) {
    const std::string& uid = it.key();
    const json& c = it.value();
    if (!IsValidClaimUid(uid)) {
      out.warnings.push_back("skipped checkpoint claim with invalid uid \"" + uid + "\"");
      continue;
    }
    ClaimEntry e;
    e.uid = uid;
    e.state = ClaimState::kPrepareCompleted;
    if (have_states) {
      std::string st = Str(c, {"checkpointState"});
      if (st == "PrepareStarted") {
        e.state = ClaimState::kPrepareStarted;
      } else if (st != "PrepareCompleted") {
        out.warnings.push_back("checkpoint claim " + uid + " has state \"" + st +
                               "\"; imported as PrepareStarted so it is redone or unprepared");
        e.state = ClaimState::kPrepareStarted;
      }
    }
    e.ns = Str(c, {"namespace"});
    e.name = Str(c, {"name"});
    const json* status = Field(c, {"status"});
    const json* alloc = status ? Field(*status, {"allocation"}) : nullptr;
    const json* devs = alloc ? Field(*alloc, {"devices"}) : nullptr;
    const json* results = devs ? Field(*devs, {"results"}) : nullptr;
    if (results != nullptr && results->is_array()) {
      for (const auto& r : *results) {
        AllocatedDevice d;
        d.request = Str(r, {"request"});
        d.driver = Str(r, {"driver"});
        d.pool = Str(r, {"pool"});
        d.device = Str(r, {"device"});
        const json* adm = Field(r, {"adminAccess"});
        d.admin_access = adm != nullptr && adm->is_boolean() && adm->get<bool>();
        d.share_id = Str(r, {"shareID"});
        if (!driver_name.empty() && d.driver != driver_name) continue;
        e.allocation.push_back(std::move(d));
      }
    }
    const json* groups = c.is_array() ? &c : Field(c, {"preparedDevices"});
    if (groups != nullptr) CollectPrepared(*groups, e.prepared);
    e.held = DefaultHeld(e.allocation);
    if (e.allocation.empty()) {
      // v25.3 files had no status; the prepared devices still say what is held.
      for (const auto& p : e.prepared) e.held.push_back(p.device);
      std::sort(e.held.begin(), e.held.end());
      e.held.erase(std::unique(e.held.begin(), e.held.end()), e.held.end());
    }
    e.undo = {{"legacyCheckpoint", c}};
    e.boot_id = out.node_boot_id.empty() ? current_boot_id : out.node_boot_id;
    out.entries.push_back(std::move(e));
  }
  return out;
}

}  // namespace nvdra::ledger
