#include "ledger/legacy_checkpoint.h"

#include <algorithm>
#include <cctype>
#include <map>

#include <fmt/format.h>

#include "util/uid.h"

namespace nvdra::ledger {
namespace {

using nlohmann::json;

constexpr const char* kComputeDomainDriver = "compute-domain.nvidia.com";

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

bool KeyIs(const std::string& k, const char* n) {
  return k.size() == std::char_traits<char>::length(n) &&
         std::equal(k.begin(), k.end(), n, [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
         });
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

// "channel-<n>" as the compute-domain driver names its channel devices.
std::optional<int> ChannelNumber(const std::string& device) {
  constexpr std::string_view prefix = "channel-";
  if (device.size() <= prefix.size() || device.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  int n = 0;
  for (size_t i = prefix.size(); i < device.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(device[i])) || n > kLegacyImexChannelCount) return std::nullopt;
    n = n * 10 + (device[i] - '0');
  }
  return n < kLegacyImexChannelCount ? std::optional<int>(n) : std::nullopt;
}

// Whether a ComputeDomainChannelConfig with allocationMode All applies to
// `request` among the claim's allocation configs.
bool AllChannels(const json* configs, const std::string& request) {
  if (configs == nullptr || !configs->is_array()) return false;
  bool all = false;
  for (const auto& c : *configs) {  // later configs take precedence, like upstream
    auto requests = StrList(c, {"requests"});
    if (!requests.empty() && std::find(requests.begin(), requests.end(), request) == requests.end()) continue;
    const json* opaque = Field(c, {"opaque"});
    const json* params = opaque != nullptr ? Field(*opaque, {"parameters"}) : nullptr;
    if (params == nullptr || Str(*params, {"kind"}) != "ComputeDomainChannelConfig") continue;
    all = Str(*params, {"allocationMode"}) == "All";
  }
  return all;
}

// The resources a native claim holds for the same devices: compute-domain
// channels as "channel <n>" (every channel for allocationMode All), other
// devices by name, admin access exempt.
std::vector<std::string> LegacyHeld(const ClaimEntry& e, const json* configs) {
  std::vector<std::string> held;
  auto add_device = [&](const std::string& device, const std::string& driver, const std::string& request) {
    auto ch = ChannelNumber(device);
    if (ch && (driver.empty() || driver == kComputeDomainDriver)) {
      if (AllChannels(configs, request)) {
        for (int i = 0; i < kLegacyImexChannelCount; ++i) held.push_back("channel " + std::to_string(i));
      } else {
        held.push_back("channel " + std::to_string(*ch));
      }
      return;
    }
    held.push_back(device);
  };
  for (const auto& d : e.allocation) {
    if (!d.admin_access) add_device(d.device, d.driver, d.request);
  }
  if (e.allocation.empty()) {
    // v25.3 files had no status; the prepared devices still say what is held.
    for (const auto& p : e.prepared) add_device(p.device, "", p.requests.empty() ? "" : p.requests[0]);
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
    while (p_ < t_.size() && t_[p_] != ',' && t_[p_] != '}' && t_[p_] != ']' && t_[p_] != ' ' &&
           t_[p_] != '\n' && t_[p_] != '\r' && t_[p_] != '\t') {
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
    if (KeyIs(k, key)) return v;
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

// --- Writing Go's encoding of strings.

void AppendGoString(std::string& out, std::string_view s) {
  out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '<': out += "\\u003c"; break;
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", c);
        } else if (c == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
                   (static_cast<unsigned char>(s[i + 2]) == 0xA8 || static_cast<unsigned char>(s[i + 2]) == 0xA9)) {
          out += static_cast<unsigned char>(s[i + 2]) == 0xA8 ? "\\u2028" : "\\u2029";
          i += 2;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

std::string GoString(std::string_view s) {
  std::string out;
  AppendGoString(out, s);
  return out;
}

std::string GoStringList(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + GoString(v[i]);
  return out + "]";
}

// CheckpointedDevice: the same layout as the kubelet plugin library's Device.
std::string CheckpointedDevice(const PreparedDevice& d) {
  std::string out = "{\"Requests\":" + (d.requests.empty() ? std::string("null") : GoStringList(d.requests)) +
                    ",\"PoolName\":" + GoString(d.pool) + ",\"DeviceName\":" + GoString(d.device) +
                    ",\"CDIDeviceIDs\":" +
                    (d.cdi_device_ids.empty() ? std::string("null") : GoStringList(d.cdi_device_ids));
  if (!d.share_id.empty()) out += ",\"ShareID\":" + GoString(d.share_id);
  return out + "}";
}

bool IsComputeDomain(const ClaimEntry& e) {
  for (const auto& a : e.allocation) {
    if (a.driver == kComputeDomainDriver) return true;
  }
  return false;
}

// ResourceClaimStatus with the allocation this driver recorded, in the field
// order and with the omissions of the Kubernetes types.
std::string NativeStatus(const ClaimEntry& e) {
  std::string results;
  std::vector<std::string> channel_requests, daemon_requests;
  for (const auto& a : e.allocation) {
    if (!results.empty()) results += ",";
    results += "{\"request\":" + GoString(a.request) + ",\"driver\":" + GoString(a.driver) +
               ",\"pool\":" + GoString(a.pool) + ",\"device\":" + GoString(a.device);
    if (a.admin_access) results += ",\"adminAccess\":true";
    if (!a.share_id.empty()) results += ",\"shareID\":" + GoString(a.share_id);
    results += "}";
    if (ChannelNumber(a.device)) channel_requests.push_back(a.request);
    if (a.device.rfind("daemon-", 0) == 0) daemon_requests.push_back(a.request);
  }
  std::string devices = results.empty() ? "{}" : "{\"results\":[" + results + "]";
  if (!results.empty()) {
    // The compute-domain driver re-derives its undo from the configs: give it
    // the domain this driver recorded.
    std::string domain = e.undo.is_object() ? e.undo.value("domainID", "") : "";
    std::string configs;
    auto config = [&](const std::vector<std::string>& requests, const std::string& kind, bool all) {
      if (requests.empty() || domain.empty() || !IsComputeDomain(e)) return;
      if (!configs.empty()) configs += ",";
      configs += "{\"source\":\"FromClaim\",\"requests\":" + GoStringList(requests) +
                 ",\"opaque\":{\"driver\":" + GoString(kComputeDomainDriver) +
                 ",\"parameters\":{\"apiVersion\":\"resource.nvidia.com/v1beta1\",\"kind\":" + GoString(kind) +
                 ",\"domainID\":" + GoString(domain);
      if (kind == "ComputeDomainChannelConfig") {
        configs += std::string(",\"allocationMode\":") + (all ? "\"All\"" : "\"Single\"");
      }
      configs += "}}}";
    };
    config(channel_requests, "ComputeDomainChannelConfig", e.undo.is_object() && e.undo.value("allChannels", false));
    config(daemon_requests, "ComputeDomainDaemonConfig", false);
    if (!configs.empty()) devices += ",\"config\":[" + configs + "]";
    devices += "}";
  }
  return "{\"allocation\":{\"devices\":" + devices + "}}";
}

// The prepared device groups the Go driver would have written, or nullopt
// when this driver's devices cannot be described to it (MIG, VFIO).
std::optional<std::string> NativeGroups(const ClaimEntry& e) {
  if (e.prepared.empty()) return std::nullopt;
  if (IsComputeDomain(e)) {
    std::string domain = e.undo.is_object() ? e.undo.value("domainID", "") : "";
    std::string out = "[";
    for (size_t i = 0; i < e.prepared.size(); ++i) {
      const auto& d = e.prepared[i];
      auto ch = ChannelNumber(d.device);
      std::string dev = ch ? "{\"channel\":{\"info\":{\"id\":" + std::to_string(*ch) + "},\"device\":" +
                                 CheckpointedDevice(d) + "},\"daemon\":null}"
                           : "{\"channel\":null,\"daemon\":{\"info\":{\"id\":0},\"device\":" +
                                 CheckpointedDevice(d) + "}}";
      out += (i ? "," : "") + std::string("{\"devices\":[") + dev + "],\"configState\":{\"Type\":" +
             GoString(ch ? "channel" : "daemon") + ",\"ComputeDomain\":" + GoString(domain) + "}}";
    }
    return out + "]";
  }
  std::map<std::string, std::string> uuids;
  if (e.undo.is_object()) {
    for (const auto& ts : e.undo.value("timeSlicing", json::array())) {
      if (ts.is_object()) uuids[ts.value("device", "")] = ts.value("uuid", "");
    }
  }
  std::string devs;
  for (const auto& d : e.prepared) {
    if (d.device.rfind("gpu-", 0) != 0 || d.device.find("-mig-") != std::string::npos) return std::nullopt;
    if (!devs.empty()) devs += ",";
    devs += "{\"gpu\":{\"info\":{\"uuid\":" + GoString(uuids[d.device]) + "},\"device\":" + CheckpointedDevice(d) +
            "},\"mig\":null}";
  }
  return "[{\"devices\":[" + devs + "],\"configState\":{\"mpsControlDaemonID\":\"\"}}]";
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
    if (!value) return InvalidArgument("malformed JSON value (or nested deeper than " +
                                       std::to_string(kMaxLegacyJsonDepth) + " levels)");
    json k = json::parse(*key, nullptr, false);
    out.emplace_back(k.is_string() ? k.get<std::string>() : std::string(), *value);
    if (s.Eat(',')) continue;
    if (s.Eat('}') && s.AtEnd()) return out;
    return InvalidArgument("malformed JSON object");
  }
}

Result<LegacyImport> ParseLegacyCheckpoint(std::string_view json_text,
                                           const std::string& driver_name,
                                           const std::string& current_boot_id) {
  auto top = RawObjectMembers(json_text);
  json doc = top.ok() ? json::parse(json_text, nullptr, /*allow_exceptions=*/false) : json();
  if (!top.ok() || doc.is_discarded() || !doc.is_object()) {
    return DataLoss("the Go driver's checkpoint is not a JSON object" +
                    (top.ok() ? std::string() : ": " + top.status().message()));
  }
  LegacyImport out;
  // Checksums, as upstream checks them: v1 (top-level "checksum") over
  // {"checksum":0,"v1":...}, then v2 over the v2 object with checksum 0.
  std::string_view raw_v1 = Member(*top, "v1"), raw_v2 = Member(*top, "v2");
  const json* stored_v1 = Field(doc, {"checksum"});
  uint64_t want_v1 = stored_v1 != nullptr && stored_v1->is_number_unsigned() ? stored_v1->get<uint64_t>() : 0;
  std::string v1_body = raw_v1.empty() || raw_v1 == "null" ? std::string("{\"checksum\":0}")
                                                           : "{\"checksum\":0,\"v1\":" + std::string(raw_v1) + "}";
  uint32_t got_v1 = GoChecksum(v1_body);
  if (got_v1 != want_v1) {
    return DataLoss(fmt::format(
        "checkpoint is corrupted: the v1 checksum is {} but the file says {} (the Go driver refuses this "
        "file too)",
        got_v1, want_v1));
  }
  out.checksums = fmt::format("v1={}", got_v1);
  if (!raw_v2.empty() && raw_v2 != "null") {
    uint64_t want_v2 = 0;
    auto zeroed = WithZeroChecksum(raw_v2, &want_v2);
    uint32_t got_v2 = zeroed ? GoChecksum(*zeroed) : 0;
    if (!zeroed || got_v2 != want_v2) {
      return DataLoss(fmt::format(
          "checkpoint is corrupted: the v2 checksum is {} but the file says {} (the Go driver refuses "
          "this file too)",
          got_v2, want_v2));
    }
    out.checksums += fmt::format(" v2={}", got_v2);
  }

  const json* v2 = Field(doc, {"v2"});
  const json* v1 = Field(doc, {"v1"});
  const json* claims = nullptr;
  std::string_view raw_claims;
  bool have_states = false;
  if (v2 != nullptr && v2->is_object()) {
    out.node_boot_id = Str(*v2, {"nodeBootID"});
    claims = Field(*v2, {"preparedClaims"});
    auto m = RawObjectMembers(raw_v2);
    if (m.ok()) raw_claims = Member(*m, "preparedClaims");
    have_states = true;
  } else if (v1 != nullptr && v1->is_object()) {
    // Only without v2: an empty v2 (no prepared claims) wins over v1, as upstream reads it.
    claims = Field(*v1, {"preparedClaims"});
    auto m = RawObjectMembers(raw_v1);
    if (m.ok()) raw_claims = Member(*m, "preparedClaims");
    have_states = false;  // v1 recorded completed claims only
  }
  if (claims == nullptr || !claims->is_object()) return out;
  std::vector<std::pair<std::string, std::string_view>> raw_by_uid;
  if (!raw_claims.empty()) {
    auto m = RawObjectMembers(raw_claims);
    if (m.ok()) raw_by_uid = std::move(m).value();
  }
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
    const json* configs = devs ? Field(*devs, {"config"}) : nullptr;
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
    e.held = LegacyHeld(e, configs);
    e.undo = {{"legacyCheckpoint", c}};
    std::string_view raw = Member(raw_by_uid, uid.c_str());
    if (!raw.empty()) e.undo["legacyCheckpointJson"] = std::string(raw);
    e.boot_id = out.node_boot_id.empty() ? current_boot_id : out.node_boot_id;
    out.entries.push_back(std::move(e));
  }
  return out;
}

std::string WriteLegacyCheckpoint(const std::vector<ClaimEntry>& entries, const std::string& boot_id) {
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
    if (!as_imported || status.empty()) status = NativeStatus(e);
    if (!as_imported || (completed && groups.empty())) {
      auto g = NativeGroups(e);
      groups = g ? *g : "";
      // Devices the Go driver cannot be told about: let it treat the claim as
      // half prepared (it never reuses the devices, and its cleanup drops it).
      if (!g) completed = false;
    }
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
  if (!boot_id.empty()) v2_rest += ",\"nodeBootID\":" + GoString(boot_id);
  uint32_t c2 = GoChecksum("{\"checksum\":0" + v2_rest + "}");
  uint32_t c1 = GoChecksum("{\"checksum\":0,\"v1\":" + v1 + "}");
  return "{\"checksum\":" + std::to_string(c1) + ",\"v1\":" + v1 + ",\"v2\":{\"checksum\":" + std::to_string(c2) +
         v2_rest + "}}";
}

}  // namespace nvdra::ledger
