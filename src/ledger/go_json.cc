#include "ledger/go_json.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "util/json_reader.h"

namespace nvdra::ledger {

using nlohmann::json;

bool GoKeyIs(std::string_view key, std::string_view name) {
  return JsonKeyMatches(key, name, JsonKeyMatch::kCaseInsensitive);
}

const json* GoField(const json& obj, std::initializer_list<const char*> names) {
  const JsonReader r(obj, "", JsonKeyMatch::kCaseInsensitive);
  for (const char* n : names) {
    if (const json* v = r.Find(n)) return v;
  }
  return nullptr;
}

std::string GoStr(const json& obj, std::initializer_list<const char*> names) {
  const json* v = GoField(obj, names);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

std::vector<std::string> GoStrList(const json& obj, std::initializer_list<const char*> names) {
  std::vector<std::string> out;
  const json* v = GoField(obj, names);
  if (v == nullptr || !v->is_array()) return out;
  for (const auto& s : *v) {
    if (s.is_string()) out.push_back(s.get<std::string>());
  }
  return out;
}

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

std::string GoConsumedCapacity(const std::map<std::string, std::string>& consumed) {
  std::string out = "{";
  for (const auto& [name, amount] : consumed) {
    if (out.size() > 1) out += ",";
    out += GoString(name) + ":" + GoString(amount);
  }
  return out + "}";
}

std::string GoCheckpointedDevice(const PreparedDevice& d) {
  std::string out = "{\"Requests\":" + (d.requests.empty() ? std::string("null") : GoStringList(d.requests)) +
                    ",\"PoolName\":" + GoString(d.pool) + ",\"DeviceName\":" + GoString(d.device) +
                    ",\"CDIDeviceIDs\":" +
                    (d.cdi_device_ids.empty() ? std::string("null") : GoStringList(d.cdi_device_ids));
  if (!d.share_id.empty()) out += ",\"ShareID\":" + GoString(d.share_id);
  return out + "}";
}

}  // namespace nvdra::ledger
