#include "driver/undo_record.h"

#include <algorithm>

namespace nvdra::driver::undo {

using nlohmann::json;

Result<Fields> Fields::Of(const json& j, std::string what) {
  if (!j.is_object()) return InvalidArgument(what + " is not a JSON object: " + j.dump());
  return Fields(j, std::move(what));
}

const json* Fields::Find(const char* key) const {
  auto it = j_->find(key);
  return it == j_->end() || it->is_null() ? nullptr : &*it;
}

Status Fields::WrongType(const char* key, const char* want) const {
  return InvalidArgument(what_ + ": field \"" + key + "\" is not " + want + ": " + (*j_)[key].dump());
}

Result<std::optional<std::string>> Fields::String(const char* key) const {
  const json* v = Find(key);
  if (v == nullptr) return std::optional<std::string>();
  if (!v->is_string()) return WrongType(key, "a string");
  return std::optional<std::string>(v->get<std::string>());
}

Result<std::optional<int64_t>> Fields::Int(const char* key) const {
  const json* v = Find(key);
  if (v == nullptr) return std::optional<int64_t>();
  if (!v->is_number_integer()) return WrongType(key, "an integer");
  return std::optional<int64_t>(v->get<int64_t>());
}

Result<std::optional<bool>> Fields::Bool(const char* key) const {
  const json* v = Find(key);
  if (v == nullptr) return std::optional<bool>();
  if (!v->is_boolean()) return WrongType(key, "a boolean");
  return std::optional<bool>(v->get<bool>());
}

Result<std::vector<std::string>> Fields::Strings(const char* key) const {
  const json* v = Find(key);
  std::vector<std::string> out;
  if (v == nullptr) return out;
  if (!v->is_array()) return WrongType(key, "a list of strings");
  for (const auto& s : *v) {
    if (!s.is_string()) return WrongType(key, "a list of strings");
    out.push_back(s.get<std::string>());
  }
  return out;
}

Result<json> Fields::Array(const char* key) const {
  const json* v = Find(key);
  if (v == nullptr) return json::array();
  if (!v->is_array()) return WrongType(key, "a list");
  return *v;
}

json Fields::Unknown(std::initializer_list<const char*> known) const {
  json out = json::object();
  for (auto it = j_->begin(); it != j_->end(); ++it) {
    bool is_known = std::any_of(known.begin(), known.end(), [&](const char* k) { return it.key() == k; });
    if (!is_known) out[it.key()] = it.value();
  }
  return out;
}

void MergeUnknown(json& out, const json& unknown) {
  if (!unknown.is_object()) return;
  for (auto it = unknown.begin(); it != unknown.end(); ++it) {
    if (!out.contains(it.key())) out[it.key()] = it.value();
  }
}

}  // namespace nvdra::driver::undo
