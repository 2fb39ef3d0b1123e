#include "ledger/claim_entry.h"

#include <algorithm>
#include <cstring>
#include <tuple>

#include "util/json_depth.h"

namespace nvdra::ledger {
namespace {

using nlohmann::json;

constexpr const char* kKnownKeys[] = {"uid",       "namespace", "name",   "state",  "allocation",
                                      "held",      "prepared",  "undo",   "bootID", "updatedUnixMs",
                                      "consumers", "attempt",   "shares", "origin"};

bool IsKnownKey(const std::string& k) {
  return std::find(std::begin(kKnownKeys), std::end(kKnownKeys), k) != std::end(kKnownKeys);
}

std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::vector<std::string> StrList(const json& j, const char* key) {
  std::vector<std::string> out;
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return out;
  for (const auto& v : *it) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

json AmountsToJson(const std::map<std::string, int64_t>& m) {
  json j = json::object();
  for (const auto& [k, v] : m) j[k] = v;
  return j;
}

std::map<std::string, int64_t> AmountsFromJson(const json& j, const char* key) {
  std::map<std::string, int64_t> out;
  auto it = j.find(key);
  if (it == j.end() || !it->is_object()) return out;
  for (const auto& [k, v] : it->items()) {
    if (v.is_number_integer()) out[k] = v.get<int64_t>();
  }
  return out;
}

json ShareToJson(const HeldShare& s) {
  json j = s.extra.is_object() ? s.extra : json::object();
  j["resource"] = s.resource;
  if (!s.share_id.empty()) j["shareID"] = s.share_id;
  j["consumed"] = AmountsToJson(s.consumed);
  if (!s.capacity.empty()) j["capacity"] = AmountsToJson(s.capacity);
  j["sharing"] = s.sharing;
  return j;
}

HeldShare ShareFromJson(const json& j) {
  HeldShare s;
  s.resource = Str(j, "resource");
  s.share_id = Str(j, "shareID");
  s.consumed = AmountsFromJson(j, "consumed");
  s.capacity = AmountsFromJson(j, "capacity");
  s.sharing = Str(j, "sharing");
  for (const auto& [k, v] : j.items()) {
    if (k != "resource" && k != "shareID" && k != "consumed" && k != "capacity" && k != "sharing") s.extra[k] = v;
  }
  return s;
}

}  // namespace

const char* ClaimOriginName(ClaimOrigin o) {
  switch (o) {
    case ClaimOrigin::kPrepare: return "";
    case ClaimOrigin::kRebuilt: return "rebuilt";
    case ClaimOrigin::kLegacyCheckpoint: return "legacyCheckpoint";
  }
  return "";
}

namespace {

// The "origin" key, or for an entry written before it existed, the marker
// its undo record carries. An origin this version does not know is kept in
// `extra` (written back as it was) and counts as kPrepare.
void DecodeOrigin(const json& j, ClaimEntry& e) {
  if (auto it = j.find("origin"); it != j.end()) {
    for (ClaimOrigin o : {ClaimOrigin::kRebuilt, ClaimOrigin::kLegacyCheckpoint}) {
      if (it->is_string() && it->get<std::string>() == ClaimOriginName(o)) {
        e.origin = o;
        return;
      }
    }
    e.extra["origin"] = *it;
    return;
  }
  if (!e.undo.is_object()) return;
  if (e.undo.contains("rebuilt")) {
    e.origin = ClaimOrigin::kRebuilt;
  } else if (e.undo.contains("legacyCheckpoint")) {
    e.origin = ClaimOrigin::kLegacyCheckpoint;
  }
}

}  // namespace

const char* ClaimStateName(ClaimState s) {
  switch (s) {
    case ClaimState::kPrepareStarted: return "PrepareStarted";
    case ClaimState::kPrepareCompleted: return "PrepareCompleted";
    case ClaimState::kUnprepareStarted: return "UnprepareStarted";
    case ClaimState::kTombstone: return "Tombstone";
  }
  return "Unknown";
}

std::optional<ClaimState> ParseClaimState(std::string_view s) {
  for (ClaimState c : {ClaimState::kPrepareStarted, ClaimState::kPrepareCompleted, ClaimState::kUnprepareStarted,
                       ClaimState::kTombstone}) {
    if (s == ClaimStateName(c)) return c;
  }
  return std::nullopt;
}

json EntryToJson(const ClaimEntry& e) {
  json j = e.extra.is_object() ? e.extra : json::object();
  j["uid"] = e.uid;
  j["namespace"] = e.ns;
  j["name"] = e.name;
  j["state"] = e.unknown_state.empty() ? ClaimStateName(e.state) : e.unknown_state;
  json alloc = json::array();
  for (const auto& d : e.allocation) {
    json a = {{"request", d.request}, {"driver", d.driver}, {"pool", d.pool}, {"device", d.device}};
    if (d.admin_access) a["adminAccess"] = true;
    if (!d.share_id.empty()) a["shareID"] = d.share_id;
    if (!d.consumed_capacity.empty()) a["consumedCapacity"] = d.consumed_capacity;
    alloc.push_back(std::move(a));
  }
  j["allocation"] = std::move(alloc);
  j["held"] = e.held;
  if (!e.shares.empty()) {
    json shares = json::array();
    for (const auto& sh : e.shares) shares.push_back(ShareToJson(sh));
    j["shares"] = std::move(shares);
  }
  if (!e.consumers.empty()) j["consumers"] = e.consumers;
  if (!e.attempt.empty()) j["attempt"] = e.attempt;
  json prep = json::array();
  for (const auto& d : e.prepared) {
    json p = {{"requests", d.requests}, {"pool", d.pool}, {"device", d.device}, {"cdiDeviceIDs", d.cdi_device_ids}};
    if (!d.share_id.empty()) p["shareID"] = d.share_id;
    prep.push_back(std::move(p));
  }
  j["prepared"] = std::move(prep);
  j["undo"] = e.undo;
  if (e.origin != ClaimOrigin::kPrepare) j["origin"] = ClaimOriginName(e.origin);
  j["bootID"] = e.boot_id;
  j["updatedUnixMs"] = std::chrono::duration_cast<std::chrono::milliseconds>(e.updated.time_since_epoch()).count();
  return j;
}

namespace {

// Whether dump() writes `v` other than as is: a control character, a
// quote, a backslash, DEL or a byte of UTF-8. Eight bytes at a time: the
// strings of a record are mostly ids and names with nothing to escape.
bool NeedsEscaping(std::string_view v) {
  constexpr uint64_t kOnes = 0x0101010101010101ull;
  constexpr uint64_t kHigh = 0x8080808080808080ull;
  // High bit of each byte of `x` that is zero.
  auto zero_bytes = [](uint64_t x) { return (x - kOnes) & ~x & kHigh; };
  size_t i = 0;
  for (; i + 8 <= v.size(); i += 8) {
    uint64_t x;
    std::memcpy(&x, v.data() + i, 8);
    // Bytes below 0x20 (for bytes without their high bit, which are caught
    // by the last term anyway), '"', '\\', 0x7f, and 0x80 and above.
    uint64_t hit = ((x - kOnes * 0x20) & ~x) | zero_bytes(x ^ (kOnes * '"')) | zero_bytes(x ^ (kOnes * '\\')) |
                   zero_bytes(x ^ (kOnes * 0x7f)) | x;
    if ((hit & kHigh) != 0) return true;
  }
  for (; i < v.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(v[i]);
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') return true;
  }
  return false;
}

// A string as dump() writes it: plain ASCII as is; anything else (escapes,
// UTF-8, which dump checks) through the document.
void AppendJsonString(std::string& out, std::string_view v) {
  if (NeedsEscaping(v)) {
    out += json(std::string(v)).dump();
    return;
  }
  out.reserve(out.size() + v.size() + 2);
  out += '"';
  out.append(v);
  out += '"';
}

void AppendJsonStrings(std::string& out, const std::vector<std::string>& v) {
  out += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += ',';
    AppendJsonString(out, v[i]);
  }
  out += ']';
}

// A member after the first: ,"key":"value".
void AppendMember(std::string& out, const char* key, std::string_view v) {
  out += ",\"";
  out += key;
  out += "\":";
  AppendJsonString(out, v);
}

// The "allocation" and "prepared" arrays, keys in the document's (sorted) order.
void AppendAllocation(std::string& out, const std::vector<AllocatedDevice>& allocation) {
  out += "\"allocation\":[";
  for (size_t i = 0; i < allocation.size(); ++i) {
    const auto& d = allocation[i];
    out += i > 0 ? ",{" : "{";
    if (d.admin_access) out += "\"adminAccess\":true,";
    out += "\"device\":";
    AppendJsonString(out, d.device);
    AppendMember(out, "driver", d.driver);
    AppendMember(out, "pool", d.pool);
    AppendMember(out, "request", d.request);
    if (!d.share_id.empty()) AppendMember(out, "shareID", d.share_id);
    out += '}';
  }
  out += ']';
}

void AppendPrepared(std::string& out, const std::vector<model::PreparedDevice>& prepared) {
  out += ",\"prepared\":[";
  for (size_t i = 0; i < prepared.size(); ++i) {
    const auto& d = prepared[i];
    out += i > 0 ? ",{\"cdiDeviceIDs\":" : "{\"cdiDeviceIDs\":";
    AppendJsonStrings(out, d.cdi_device_ids);
    AppendMember(out, "device", d.device);
    AppendMember(out, "pool", d.pool);
    out += ",\"requests\":";
    AppendJsonStrings(out, d.requests);
    if (!d.share_id.empty()) AppendMember(out, "shareID", d.share_id);
    out += '}';
  }
  out += ']';
}

}  // namespace

namespace {

// Whether `a` and `b` dump to the same text. json's own == does not say:
// it holds for 1 and 1.0, and for 0.0 and -0.0, which dump differently.
bool SameDump(const json& a, const json& b) {
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case json::value_t::object: {
      if (a.size() != b.size()) return false;
      for (auto i = a.begin(), k = b.begin(); i != a.end(); ++i, ++k) {
        if (i.key() != k.key() || !SameDump(*i, *k)) return false;
      }
      return true;
    }
    case json::value_t::array: {
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (!SameDump(a[i], b[i])) return false;
      }
      return true;
    }
    case json::value_t::number_float: {
      const double x = a.get<double>(), y = b.get<double>();
      return std::memcmp(&x, &y, sizeof x) == 0;
    }
    default: return a == b;
  }
}

// Written straight from the entry: nothing beyond what this version knows
// of every claim.
bool Plain(const ClaimEntry& e) {
  bool plain = (!e.extra.is_object() || e.extra.empty()) && e.shares.empty();
  for (const auto& d : e.allocation) plain = plain && d.consumed_capacity.empty();
  return plain;
}

int64_t UnixMs(const ClaimEntry& e) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(e.updated.time_since_epoch()).count();
}

// The members in key order (the document's dump sorts them), each written
// only from its own field, so a part equal to the previous entry's is
// copied from that entry's text.
class PartWriter {
 public:
  PartWriter(EntryText& t, const ClaimEntry* before, const EntryText* before_text)
      : t_(t), before_(before_text != nullptr && before_text->parts ? before : nullptr), before_text_(before_text) {
    t_.json.reserve(before_ != nullptr ? before_text_->json.size() + 16 : 512);
  }
  // `same(before)`: the member equals the previous entry's; `write()`: writes it.
  template <typename Same, typename Write>
  void Part(Same&& same, Write&& write) {
    t_.at[k_] = static_cast<uint32_t>(t_.json.size());
    if (before_ != nullptr && same(*before_)) {
      const uint32_t from = before_text_->at[k_];
      t_.json.append(before_text_->json, from, before_text_->at[k_ + 1] - from);
    } else {
      write();
    }
    ++k_;
  }
  void Finish() {
    t_.at[k_] = static_cast<uint32_t>(t_.json.size());
    t_.parts = k_ == kEntryTextParts;
  }

 private:
  EntryText& t_;
  const ClaimEntry* before_;
  const EntryText* before_text_;
  size_t k_ = 0;
};

}  // namespace

EntryText EntryJsonParts(const ClaimEntry& e, const ClaimEntry* before, const EntryText* before_text) {
  EntryText t;
  if (!Plain(e)) {
    t.json = EntryToJson(e).dump();
    return t;
  }
  std::string& out = t.json;
  PartWriter w(t, before, before_text);
  using B = const ClaimEntry&;
  w.Part([&](B b) { return e.allocation == b.allocation; }, [&] { AppendAllocation(out += '{', e.allocation); });
  w.Part([&](B b) { return e.attempt == b.attempt; },
         [&] {
           if (!e.attempt.empty()) AppendMember(out, "attempt", e.attempt);
         });
  w.Part([&](B b) { return e.boot_id == b.boot_id; }, [&] { AppendMember(out, "bootID", e.boot_id); });
  w.Part([&](B b) { return e.consumers == b.consumers; },
         [&] {
           if (e.consumers.empty()) return;
           out += ",\"consumers\":";
           AppendJsonStrings(out, e.consumers);
         });
  w.Part([&](B b) { return e.held == b.held; }, [&] { AppendJsonStrings(out += ",\"held\":", e.held); });
  w.Part([&](B b) { return e.name == b.name; }, [&] { AppendMember(out, "name", e.name); });
  w.Part([&](B b) { return e.ns == b.ns; }, [&] { AppendMember(out, "namespace", e.ns); });
  w.Part([&](B b) { return e.origin == b.origin; },
         [&] {
           if (e.origin != ClaimOrigin::kPrepare) AppendMember(out, "origin", ClaimOriginName(e.origin));
         });
  w.Part([&](B b) { return e.prepared == b.prepared; }, [&] { AppendPrepared(out, e.prepared); });
  w.Part([&](B b) { return e.state == b.state && e.unknown_state == b.unknown_state; },
         [&] {
           AppendMember(out, "state",
                        e.unknown_state.empty() ? std::string_view(ClaimStateName(e.state)) : e.unknown_state);
         });
  w.Part([&](B b) { return e.uid == b.uid; }, [&] { AppendMember(out, "uid", e.uid); });
  w.Part([&](B b) { return SameDump(e.undo, b.undo); }, [&] { (out += ",\"undo\":") += e.undo.dump(); });
  w.Part([&](B b) { return UnixMs(e) == UnixMs(b); },
         [&] {
           (out += ",\"updatedUnixMs\":") += std::to_string(UnixMs(e));
           out += '}';
         });
  w.Finish();
  return t;
}

std::string EntryJsonText(const ClaimEntry& e) { return EntryJsonParts(e).json; }

Result<ClaimEntry> EntryFromJson(const json& j) {
  if (!j.is_object()) return InvalidArgument("claim entry is not a JSON object");
  ClaimEntry e;
  e.uid = Str(j, "uid");
  if (e.uid.empty()) return InvalidArgument("claim entry has no uid");
  std::string state = Str(j, "state");
  auto st = ParseClaimState(state);
  if (st) {
    e.state = *st;
  } else {
    if (state.empty()) return InvalidArgument("claim " + e.uid + " has no state");
    e.state = ClaimState::kPrepareStarted;
    e.unknown_state = state;
  }
  e.ns = Str(j, "namespace");
  e.name = Str(j, "name");
  if (auto it = j.find("allocation"); it != j.end() && it->is_array()) {
    for (const auto& a : *it) {
      if (!a.is_object()) continue;
      AllocatedDevice d;
      d.request = Str(a, "request");
      d.driver = Str(a, "driver");
      d.pool = Str(a, "pool");
      d.device = Str(a, "device");
      auto adm = a.find("adminAccess");
      d.admin_access = adm != a.end() && adm->is_boolean() && adm->get<bool>();
      d.share_id = Str(a, "shareID");
      if (auto cc = a.find("consumedCapacity"); cc != a.end() && cc->is_object()) {
        for (const auto& [k, v] : cc->items()) {
          if (v.is_string()) d.consumed_capacity[k] = v.get<std::string>();
        }
      }
      e.allocation.push_back(std::move(d));
    }
  }
  e.held = StrList(j, "held");
  if (auto it = j.find("shares"); it != j.end() && it->is_array()) {
    for (const auto& sh : *it) {
      // A share names its device; one that does not cannot be counted.
      if (sh.is_object() && !Str(sh, "resource").empty()) e.shares.push_back(ShareFromJson(sh));
    }
  }
  e.consumers = StrList(j, "consumers");
  e.attempt = Str(j, "attempt");
  if (auto it = j.find("prepared"); it != j.end() && it->is_array()) {
    for (const auto& p : *it) {
      if (!p.is_object()) continue;
      PreparedDevice d;
      d.requests = StrList(p, "requests");
      d.pool = Str(p, "pool");
      d.device = Str(p, "device");
      d.cdi_device_ids = StrList(p, "cdiDeviceIDs");
      d.share_id = Str(p, "shareID");
      e.prepared.push_back(std::move(d));
    }
  }
  if (auto it = j.find("undo"); it != j.end()) e.undo = *it;
  e.boot_id = Str(j, "bootID");
  if (auto it = j.find("updatedUnixMs"); it != j.end() && it->is_number_integer()) {
    e.updated = std::chrono::system_clock::time_point(std::chrono::milliseconds(it->get<int64_t>()));
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!IsKnownKey(it.key())) e.extra[it.key()] = it.value();
  }
  DecodeOrigin(j, e);
  return e;
}

nlohmann::json ParsePersistedJson(std::string_view text) {
  // Checked before the parser recurses: one pass over a record of a few KiB.
  if (JsonNestingDepth(text, kMaxPersistedJsonDepth) > kMaxPersistedJsonDepth) {
    return json(json::value_t::discarded);
  }
  return json::parse(text, nullptr, /*allow_exceptions=*/false);
}

bool SameAllocation(std::vector<AllocatedDevice> a, std::vector<AllocatedDevice> b) {
  // The consumed capacity is left out: the share id already names the
  // share, and an entry rewritten by a version that did not know the field
  // has lost it.
  auto key = [](const AllocatedDevice& d) {
    return std::tie(d.request, d.driver, d.pool, d.device, d.admin_access, d.share_id);
  };
  auto less = [&](const AllocatedDevice& x, const AllocatedDevice& y) { return key(x) < key(y); };
  std::sort(a.begin(), a.end(), less);
  std::sort(b.begin(), b.end(), less);
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [&](const AllocatedDevice& x, const AllocatedDevice& y) { return key(x) == key(y); });
}

std::vector<const HeldShare*> SharesOf(const ClaimEntry& e, const std::string& resource) {
  std::vector<const HeldShare*> out;
  for (const auto& s : e.shares) {
    if (s.resource == resource) out.push_back(&s);
  }
  return out;
}

std::vector<std::string> DefaultHeld(const std::vector<AllocatedDevice>& allocation) {
  std::vector<std::string> held;
  for (const auto& d : allocation) {
    if (!d.admin_access) held.push_back(d.device);
  }
  std::sort(held.begin(), held.end());
  held.erase(std::unique(held.begin(), held.end()), held.end());
  return held;
}

}  // namespace nvdra::ledger
