#include "ledger/legacy_checkpoint.h"

#include <set>
#include <unordered_map>

#include <algorithm>
#include <cctype>
#include <map>

#include <fmt/format.h>

#include "ledger/go_json.h"
#include "util/uid.h"

namespace nvdra::ledger {
namespace {

using nlohmann::json;

PreparedDevice FromCheckpointedDevice(const json& d) {
  PreparedDevice p;
  p.requests = GoStrList(d, {"Requests", "request_names"});
  p.pool = GoStr(d, {"PoolName", "pool_name"});
  p.device = GoStr(d, {"DeviceName", "device_name"});
  p.cdi_device_ids = GoStrList(d, {"CDIDeviceIDs", "cdi_device_ids"});
  p.share_id = GoStr(d, {"ShareID"});
  return p;
}

// A group is {"devices":[{"gpu":{...,"device":D}|null, "mig":..., ...}],
// "configState":{...}}; the oldest CD files put the CheckpointedDevice
// fields directly in the entry.
std::vector<UpstreamPreparedGroup> ReadGroups(const json& groups) {
  std::vector<UpstreamPreparedGroup> out;
  if (!groups.is_array()) return out;
  for (const auto& g : groups) {
    const json* devices = GoField(g, {"devices"});
    if (devices == nullptr || !devices->is_array()) continue;
    UpstreamPreparedGroup group;
    const json* state = GoField(g, {"configState"});
    if (state != nullptr) group.config_state = *state;
    for (const auto& dev : *devices) {
      if (!dev.is_object()) continue;
      if (GoField(dev, {"DeviceName", "device_name"}) != nullptr) {
        group.devices.push_back({"", dev, FromCheckpointedDevice(dev)});
        continue;
      }
      for (auto it = dev.begin(); it != dev.end(); ++it) {
        const json* inner = GoField(it.value(), {"device"});
        if (inner != nullptr && inner->is_object()) {
          std::string type = it.key();
          std::transform(type.begin(), type.end(), type.begin(), [](unsigned char c) { return std::tolower(c); });
          group.devices.push_back({type, it.value(), FromCheckpointedDevice(*inner)});
        }
      }
    }
    out.push_back(std::move(group));
  }
  return out;
}

// The opaque "parameters" of the claim's configs that apply to `request`,
// in file order: later configs take precedence, like upstream.
std::vector<json> ConfigParameters(const json* configs, const std::string& request) {
  std::vector<json> out;
  if (configs == nullptr || !configs->is_array()) return out;
  for (const auto& c : *configs) {
    auto requests = GoStrList(c, {"requests"});
    if (!requests.empty() && std::find(requests.begin(), requests.end(), request) == requests.end()) continue;
    const json* opaque = GoField(c, {"opaque"});
    const json* params = opaque != nullptr ? GoField(*opaque, {"parameters"}) : nullptr;
    if (params != nullptr) out.push_back(*params);
  }
  return out;
}

// The resources a native claim holds for the same devices, as the kind's
// codec names them (device names without one), admin access exempt.
std::vector<std::string> LegacyHeld(const ClaimEntry& e, const json* configs, const KindCodec* codec) {
  std::vector<std::string> held;
  auto add_device = [&](const std::string& device, const std::string& request) {
    if (codec == nullptr) {
      held.push_back(device);
      return;
    }
    for (auto& r : codec->HeldResources(device, ConfigParameters(configs, request))) held.push_back(std::move(r));
  };
  for (const auto& d : e.allocation) {
    if (!d.admin_access) add_device(d.device, d.request);
  }
  if (e.allocation.empty()) {
    // v25.3 files had no status; the prepared devices still say what is held.
    for (const auto& p : e.prepared) add_device(p.device, p.requests.empty() ? "" : p.requests[0]);
  }
  std::sort(held.begin(), held.end());
  held.erase(std::unique(held.begin(), held.end()), held.end());
  return held;
}

// --- Raw JSON scanning (no re-serialisation).

class Scanner {
 public:
  explicit Scanner(std::string_view t) : t_(t) {}
  void Ws() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\t' || t_[p_] == '\n' || t_[p_] == '\r')) ++p_;
  }
  bool Eat(char c) {
    Ws();
    if (p_ < t_.size() && t_[p_] == c) {
      ++p_;
      return true;
    }
    return false;
  }
  // A string token; returns its raw text including quotes.
  std::optional<std::string_view> String() {
    Ws();
    if (p_ >= t_.size() || t_[p_] != '"') return std::nullopt;
    size_t b = p_++;
    while (p_ < t_.size()) {
      char c = t_[p_++];
      if (c == '\\') {
        if (p_ >= t_.size()) return std::nullopt;
        ++p_;
      } else if (c == '"') {
        return t_.substr(b, p_ - b);
      }
    }
    return std::nullopt;
  }
  std::optional<std::string_view> Value(int depth) {
    Ws();
    if (p_ >= t_.size()) return std::nullopt;
    if (depth > kMaxLegacyJsonDepth) return std::nullopt;
    size_t b = p_;
    char c = t_[p_];
    if (c == '"') return String();
    if (c == '{' || c == '[') {
      char close = c == '{' ? '}' : ']';
      ++p_;
      if (Eat(close)) return t_.substr(b, p_ - b);
      for (;;) {
        if (c == '{') {
          if (!String() || !Eat(':')) return std::nullopt;
        }
        if (!Value(depth + 1)) return std::nullopt;
        if (Eat(',')) continue;
        if (Eat(close)) return t_.substr(b, p_ - b);
        return std::nullopt;
      }
    }
    while (p_ < t_.size() && t_[p_] != ',' && t_[p_] != '}' && t_[p_] != ']' && t_[p_] != ' ' && t_[p_] != '\n' &&
           t_[p_] != '\r' && t_[p_] != '\t') {
      ++p_;
    }
    if (p_ == b) return std::nullopt;
    return t_.substr(b, p_ - b);
  }
  bool AtEnd() {
    Ws();
    return p_ == t_.size();
  }

 private:
  std::string_view t_;
  size_t p_ = 0;
};

std::string_view Member(const std::vector<std::pair<std::string, std::string_view>>& m, const char* key) {
  for (const auto& [k, v] : m) {
    if (GoKeyIs(k, key)) return v;
  }
  return {};
}

// `object` with the value of its "checksum" member replaced by 0, as Go
// hashes it; nullopt when it has none.
std::optional<std::string> WithZeroChecksum(std::string_view object, uint64_t* stored) {
  auto members = RawObjectMembers(object);
  if (!members.ok()) return std::nullopt;
  for (const auto& [k, v] : *members) {
    if (k != "checksum") continue;
    json n = json::parse(v, nullptr, false);
    if (!n.is_number_unsigned() && !n.is_number_integer()) return std::nullopt;
    *stored = n.get<uint64_t>();
    std::string out(object);
    out.replace(static_cast<size_t>(v.data() - object.data()), v.size(), "0");
    return out;
  }
  return std::nullopt;
}

// ResourceClaimStatus with the allocation this driver recorded, in the field
// order and with the omissions of the Kubernetes types.
std::string NativeStatus(const ClaimEntry& e, const KindCodec* codec) {
  std::string results;
  for (const auto& a : e.allocation) {
    if (!results.empty()) results += ",";
    results += "{\"request\":" + GoString(a.request) + ",\"driver\":" + GoString(a.driver) +
               ",\"pool\":" + GoString(a.pool) + ",\"device\":" + GoString(a.device);
    if (a.admin_access) results += ",\"adminAccess\":true";
    if (!a.share_id.empty()) results += ",\"shareID\":" + GoString(a.share_id);
    if (!a.consumed_capacity.empty()) results += ",\"consumedCapacity\":" + GoConsumedCapacity(a.consumed_capacity);
    results += "}";
  }
  std::string devices = results.empty() ? "{}" : "{\"results\":[" + results + "]";
  if (!results.empty()) {
    std::string configs = codec != nullptr ? codec->UpstreamConfigs(e) : "";
    if (!configs.empty()) devices += ",\"config\":[" + configs + "]";
    devices += "}";
  }
  return "{\"allocation\":{\"devices\":" + devices + "}}";
}

// The prepared device groups the Go driver would have written, or nullopt
// when this driver's devices cannot be described to it.
std::optional<std::string> NativeGroups(const ClaimEntry& e, const KindCodec* codec) {
  if (e.prepared.empty() || codec == nullptr) return std::nullopt;
  return codec->UpstreamPreparedDevices(e);
}

}  // namespace

uint32_t GoChecksum(std::string_view marshalled) {
  uint32_t h = 0x811c9dc5u;
  auto feed = [&](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 0x01000193u;
    }
  };
  feed("([]uint8)[");
  char buf[4];
  for (size_t i = 0; i < marshalled.size(); ++i) {
    if (i > 0) feed(" ");
    unsigned v = static_cast<unsigned char>(marshalled[i]);
    size_t n = 0;
    if (v >= 100) buf[n++] = static_cast<char>('0' + v / 100);
    if (v >= 10) buf[n++] = static_cast<char>('0' + v / 10 % 10);
    buf[n++] = static_cast<char>('0' + v % 10);
    feed(std::string_view(buf, n));
  }
  feed("]");
  return h;
}

Result<std::vector<std::pair<std::string, std::string_view>>> RawObjectMembers(std::string_view text) {
  Scanner s(text);
  std::vector<std::pair<std::string, std::string_view>> out;
  if (!s.Eat('{')) return InvalidArgument("not a JSON object");
  if (s.Eat('}')) return out;
  for (;;) {
    auto key = s.String();
    if (!key || !s.Eat(':')) return InvalidArgument("malformed JSON object");
    auto value = s.Value(1);
    if (!value)
      return InvalidArgument("malformed JSON value (or nested deeper than " + std::to_string(kMaxLegacyJsonDepth) +
                             " levels)");
    json k = json::parse(*key, nullptr, false);
    out.emplace_back(k.is_string() ? k.get<std::string>() : std::string(), *value);
    if (s.Eat(',')) continue;
    if (s.Eat('}') && s.AtEnd()) return out;
    return InvalidArgument("malformed JSON object");
  }
}

Result<std::vector<std::string_view>> RawArrayElements(std::string_view text) {
  Scanner s(text);
  std::vector<std::string_view> out;
  if (!s.Eat('[')) return InvalidArgument("not a JSON array");
  if (s.Eat(']')) return out;
  for (;;) {
    auto value = s.Value(1);
    if (!value)
      return InvalidArgument("malformed JSON value (or nested deeper than " + std::to_string(kMaxLegacyJsonDepth) +
                             " levels)");
    out.push_back(*value);
    if (s.Eat(',')) continue;
    if (s.Eat(']') && s.AtEnd()) return out;
    return InvalidArgument("malformed JSON array");
  }
}

namespace {

using RawMembers = std::vector<std::pair<std::string, std::string_view>>;

// A CheckpointedDevice as `release` marshals it: before v0.4.0 it was
// kubeletplugin.Device with four fields, so ShareID and Metadata (which
// that release drops when it reads them) are left out.
std::string CheckpointedDeviceForRelease(std::string_view raw, UpstreamRelease release) {
  if (release != UpstreamRelease::kV25_12_0) return std::string(raw);
  auto m = RawObjectMembers(raw);
  if (!m.ok()) return std::string(raw);
  std::string out;
  for (const auto& [k, v] : *m) {
    if (GoKeyIs(k, "ShareID") || GoKeyIs(k, "Metadata")) continue;
    out += (out.empty() ? "{" : ",") + GoString(k) + ":" + std::string(v);
  }
  return out.empty() ? "{}" : out + "}";
}

// A group's device ({"gpu":{"info":...,"device":D}|null, "mig":..., ...}),
// each member's "device" as `release` marshals it. The oldest CD format (the
// CheckpointedDevice fields directly in the entry) predates every release
// an export is for and is kept.
std::string GroupDeviceForRelease(std::string_view raw, UpstreamRelease release) {
  auto m = RawObjectMembers(raw);
  if (!m.ok()) return std::string(raw);
  std::string out;
  for (const auto& [k, v] : *m) {
    std::string value(v);
    auto inner = RawObjectMembers(v);
    if (inner.ok()) {
      std::string rebuilt;
      for (const auto& [ik, iv] : *inner) {
        rebuilt += (rebuilt.empty() ? "{" : ",") + GoString(ik) + ":" +
                   (GoKeyIs(ik, "device") ? CheckpointedDeviceForRelease(iv, release) : std::string(iv));
      }
      value = rebuilt.empty() ? "{}" : rebuilt + "}";
    }
    out += (out.empty() ? "{" : ",") + GoString(k) + ":" + value;
  }
  return out.empty() ? "{}" : out + "}";
}

// Checksums, as upstream checks them: v1 (top-level "checksum") over
// {"checksum":0,"v1":...}, then v2 over the v2 object with checksum 0.
// Returns "v1=<n>[ v2=<n>]".
Result<std::string> VerifyChecksums(const RawMembers& top, const json& doc) {
  std::string_view raw_v1 = Member(top, "v1"), raw_v2 = Member(top, "v2");
  const json* stored_v1 = GoField(doc, {"checksum"});
  uint64_t want_v1 = stored_v1 != nullptr && stored_v1->is_number_unsigned() ? stored_v1->get<uint64_t>() : 0;
  std::string v1_body = raw_v1.empty() || raw_v1 == "null" ? std::string("{\"checksum\":0}")
                                                           : "{\"checksum\":0,\"v1\":" + std::string(raw_v1) + "}";
  uint32_t got_v1 = GoChecksum(v1_body);
  if (got_v1 != want_v1) {
    return DataLoss(
        fmt::format("checkpoint is corrupted: the v1 checksum is {} but the file says {} (the Go driver refuses this "
                    "file too)",
                    got_v1, want_v1));
  }
  std::string checksums = fmt::format("v1={}", got_v1);
  if (!raw_v2.empty() && raw_v2 != "null") {
    uint64_t want_v2 = 0;
    auto zeroed = WithZeroChecksum(raw_v2, &want_v2);
    uint32_t got_v2 = zeroed ? GoChecksum(*zeroed) : 0;
    if (!zeroed || got_v2 != want_v2) {
      return DataLoss(
          fmt::format("checkpoint is corrupted: the v2 checksum is {} but the file says {} (the Go driver refuses "
                      "this file too)",
                      got_v2, want_v2));
    }
    checksums += fmt::format(" v2={}", got_v2);
  }
  return checksums;
}

// The allocation results of `codec`'s driver (all without one) and the
// allocation's configs, from an upstream claim's status.
std::vector<AllocatedDevice> ImportAllocation(const json& claim, const KindCodec* codec, const json** configs) {
  std::vector<AllocatedDevice> out;
  const json* status = GoField(claim, {"status"});
  const json* alloc = status ? GoField(*status, {"allocation"}) : nullptr;
  const json* devs = alloc ? GoField(*alloc, {"devices"}) : nullptr;
  const json* results = devs ? GoField(*devs, {"results"}) : nullptr;
  *configs = devs ? GoField(*devs, {"config"}) : nullptr;
  if (results == nullptr || !results->is_array()) return out;
  for (const auto& r : *results) {
    AllocatedDevice d;
    d.request = GoStr(r, {"request"});
    d.driver = GoStr(r, {"driver"});
    d.pool = GoStr(r, {"pool"});
    d.device = GoStr(r, {"device"});
    const json* adm = GoField(r, {"adminAccess"});
    d.admin_access = adm != nullptr && adm->is_boolean() && adm->get<bool>();
    d.share_id = GoStr(r, {"shareID"});
    if (const json* cc = GoField(r, {"consumedCapacity"}); cc != nullptr && cc->is_object()) {
      for (const auto& [name, amount] : cc->items()) {
        if (amount.is_string()) d.consumed_capacity[name] = amount.get<std::string>();
      }
    }
    if (codec != nullptr && d.driver != codec->driver_name()) continue;
    out.push_back(std::move(d));
  }
  return out;
}

// One upstream claim as a ledger entry. `have_states`: v2 (v1 recorded
// completed claims only).
ClaimEntry ImportClaim(const std::string& uid, const json& c, std::string_view raw, bool have_states,
                       const KindCodec* codec, std::vector<std::string>& warnings) {
  ClaimEntry e;
  e.uid = uid;
  e.state = ClaimState::kPrepareCompleted;
  if (have_states) {
    std::string st = GoStr(c, {"checkpointState"});
    if (st == "PrepareStarted") {
      e.state = ClaimState::kPrepareStarted;
    } else if (st != "PrepareCompleted") {
      warnings.push_back("checkpoint claim " + uid + " has state \"" + st +
                         "\"; imported as PrepareStarted so it is redone or unprepared");
      e.state = ClaimState::kPrepareStarted;
    }
  }
  e.ns = GoStr(c, {"namespace"});
  e.name = GoStr(c, {"name"});
  const json* configs = nullptr;
  e.allocation = ImportAllocation(c, codec, &configs);
  const json* groups = c.is_array() ? &c : GoField(c, {"preparedDevices"});
  UpstreamClaim upstream;
  if (groups != nullptr) upstream.groups = ReadGroups(*groups);
  for (const auto& g : upstream.groups) {
    for (const auto& d : g.devices) e.prepared.push_back(d.device);
  }
  e.held = LegacyHeld(e, configs, codec);
  // Through the kind, the record it writes for its own claims, so its
  // Unprepare, its CDI edits and its adoption at start read it as theirs.
  if (codec != nullptr) {
    for (const auto& a : e.allocation) upstream.config_parameters[a.request] = ConfigParameters(configs, a.request);
    for (const auto& p : e.prepared) {
      for (const auto& r : p.requests) upstream.config_parameters.try_emplace(r, ConfigParameters(configs, r));
    }
    e.undo = codec->ImportUndo(e, upstream);
    e.shares = codec->ImportHeldCapacity(e);
  }
  if (!e.undo.is_object()) e.undo = json::object();
  e.origin = ClaimOrigin::kLegacyCheckpoint;
  // The upstream claim as read, for inspection and for older versions
  // (which read the origin from this key), and its exact text for an export.
  e.undo["legacyCheckpoint"] = c;
  if (!raw.empty()) e.undo["legacyCheckpointJson"] = std::string(raw);
  return e;
}

}  // namespace

Result<LegacyImport> ParseLegacyCheckpoint(std::string_view json_text, const KindCodec* codec,
                                           const std::string& current_boot_id) {
  auto top = RawObjectMembers(json_text);
  json doc = top.ok() ? json::parse(json_text, nullptr, /*allow_exceptions=*/false) : json();
  if (!top.ok() || doc.is_discarded() || !doc.is_object()) {
    return DataLoss("the Go driver's checkpoint is not a JSON object" +
                    (top.ok() ? std::string() : ": " + top.status().message()));
  }
  LegacyImport out;
  NVDRA_ASSIGN_OR_RETURN(out.checksums, VerifyChecksums(*top, doc));
  const json* v2 = GoField(doc, {"v2"});
  const json* v1 = GoField(doc, {"v1"});
  const json* claims = nullptr;
  std::string_view raw_claims;
  bool have_states = false;
  if (v2 != nullptr && v2->is_object()) {
    out.node_boot_id = GoStr(*v2, {"nodeBootID"});
    claims = GoField(*v2, {"preparedClaims"});
    auto m = RawObjectMembers(Member(*top, "v2"));
    if (m.ok()) raw_claims = Member(*m, "preparedClaims");
    have_states = true;
  } else if (v1 != nullptr && v1->is_object()) {
    // Only without v2: an empty v2 (no prepared claims) wins over v1, as upstream reads it.
    claims = GoField(*v1, {"preparedClaims"});
    auto m = RawObjectMembers(Member(*top, "v1"));
    if (m.ok()) raw_claims = Member(*m, "preparedClaims");
  }
  if (claims == nullptr || !claims->is_object()) return out;
  RawMembers raw_by_uid;
  if (!raw_claims.empty()) {
    auto m = RawObjectMembers(raw_claims);
    if (m.ok()) raw_by_uid = std::move(m).value();
  }
  // The Go driver writes a map, so a UID appears once. A file that holds one
  // twice was not written by it: which of the two holds the devices cannot
  // be told (a JSON reader keeps either), so the file is refused as corrupt,
  // like a wrong checksum, rather than imported one way and exported the
  // other.
  std::unordered_map<std::string_view, std::string_view> raw_of;  // exact key: one lookup per claim
  raw_of.reserve(raw_by_uid.size());
  for (const auto& [uid, value] : raw_by_uid) {
    if (!raw_of.emplace(uid, value).second) {
      return DataLoss("checkpoint is corrupted: claim " + uid +
                      " appears more than once in preparedClaims (the Go driver never writes that)");
    }
  }
  for (auto it = claims->begin(); it != claims->end(); ++it) {
    const std::string& uid = it.key();
    if (!IsValidClaimUid(uid)) {
      out.warnings.push_back("skipped checkpoint claim with invalid uid \"" + uid + "\"");
      continue;
    }
    auto raw = raw_of.find(uid);
    ClaimEntry e = ImportClaim(uid, it.value(), raw == raw_of.end() ? Member(raw_by_uid, uid.c_str()) : raw->second,
                               have_states, codec, out.warnings);
    e.boot_id = out.node_boot_id.empty() ? current_boot_id : out.node_boot_id;
    out.entries.push_back(std::move(e));
  }
  return out;
}

std::string UpstreamGroupsForRelease(std::string_view groups, const KindCodec* codec, UpstreamRelease release) {
  auto list = RawArrayElements(groups);
  if (!list.ok()) return std::string(groups);
  std::string out;
  for (std::string_view g : *list) {
    auto members = RawObjectMembers(g);
    std::string group;
    if (!members.ok()) {
      group = std::string(g);
    } else {
      for (const auto& [k, v] : *members) {
        std::string value(v);
        if (GoKeyIs(k, "devices")) {
          auto devices = RawArrayElements(v);
          if (devices.ok()) {
            value.clear();
            for (std::string_view d : *devices) value += (value.empty() ? "" : ",") + GroupDeviceForRelease(d, release);
            value = "[" + value + "]";
          }
        } else if (GoKeyIs(k, "configState") && codec != nullptr) {
          value = codec->UpstreamConfigState(v, release);
        }
        group += (group.empty() ? "{" : ",") + GoString(k) + ":" + value;
      }
      group = group.empty() ? "{}" : group + "}";
    }
    out += (out.empty() ? "" : ",") + group;
  }
  return "[" + out + "]";
}

std::string WriteLegacyCheckpoint(const std::vector<ClaimEntry>& entries, const std::string& boot_id,
                                  const KindCodec* codec, UpstreamRelease release) {
  std::map<std::string, std::pair<std::string, std::string>> claims;  // uid -> (v2 claim, v1 claim or "")
  for (const auto& e : entries) {
    if (!HoldsResources(e.state)) continue;
    // An unprepare in progress is finished by the Go driver from a completed entry.
    bool completed = e.state != ClaimState::kPrepareStarted;
    std::string status, groups;
    bool as_imported = false;
    if (e.undo.is_object() && e.undo.contains("legacyCheckpointJson") && e.undo["legacyCheckpointJson"].is_string()) {
      std::string raw = e.undo["legacyCheckpointJson"].get<std::string>();
      auto m = RawObjectMembers(raw);
      if (m.ok()) {
        status = std::string(Member(*m, "status"));
        groups = std::string(Member(*m, "preparedDevices"));
        if (Member(*m, "status").empty() && Member(*m, "preparedDevices").empty() && raw.size() > 0 && raw[0] == '[') {
          groups = raw;  // the oldest CD format: the claim is its groups
        }
        as_imported = true;
      }
    }
    if (!as_imported || status.empty()) status = NativeStatus(e, codec);
    if (!as_imported || (completed && groups.empty())) {
      auto g = NativeGroups(e, codec);
      groups = g ? *g : "";
      // Devices the Go driver cannot be told about: let it treat the claim as
      // half prepared (it never reuses the devices, and its cleanup drops it).
      if (!g) completed = false;
    }
    if (!groups.empty() && groups != "null" && groups != "[]")
      groups = UpstreamGroupsForRelease(groups, codec, release);
    std::string v2 = "{\"checkpointState\":" + GoString(completed ? "PrepareCompleted" : "PrepareStarted") +
                     ",\"status\":" + status;
    if (!groups.empty() && groups != "null" && groups != "[]") v2 += ",\"preparedDevices\":" + groups;
    if (!e.name.empty()) v2 += ",\"name\":" + GoString(e.name);
    if (!e.ns.empty()) v2 += ",\"namespace\":" + GoString(e.ns);
    v2 += "}";
    std::string v1;
    if (completed) {
      v1 = "{\"status\":" + status;
      if (!groups.empty() && groups != "null" && groups != "[]") v1 += ",\"preparedDevices\":" + groups;
      v1 += "}";
    }
    claims[e.uid] = {v2, v1};
  }
  std::string v2_claims, v1_claims;
  for (const auto& [uid, c] : claims) {
    v2_claims += (v2_claims.empty() ? "" : ",") + GoString(uid) + ":" + c.first;
    if (!c.second.empty()) v1_claims += (v1_claims.empty() ? "" : ",") + GoString(uid) + ":" + c.second;
  }
  std::string v1 = v1_claims.empty() ? "{}" : "{\"preparedClaims\":{" + v1_claims + "}}";
  std::string v2_rest;
  if (!v2_claims.empty()) v2_rest += ",\"preparedClaims\":{" + v2_claims + "}";
  if (!boot_id.empty() && release != UpstreamRelease::kV25_12_0) v2_rest += ",\"nodeBootID\":" + GoString(boot_id);
  uint32_t c2 = GoChecksum("{\"checksum\":0" + v2_rest + "}");
  uint32_t c1 = GoChecksum("{\"checksum\":0,\"v1\":" + v1 + "}");
  return "{\"checksum\":" + std::to_string(c1) + ",\"v1\":" + v1 + ",\"v2\":{\"checksum\":" + std::to_string(c2) +
         v2_rest + "}}";
}

}  // namespace nvdra::ledger
