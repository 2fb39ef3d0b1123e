#include "kube/json_fields.h"

namespace nvdra::kube {

using nlohmann::json;

const json* FindField(const json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::string StringField(const json& object, std::string_view key) {
  const json* v = FindField(object, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

int64_t IntField(const json& object, std::string_view key) {
  const json* v = FindField(object, key);
  if (v == nullptr || !v->is_number_integer()) return 0;
  // An unsigned value beyond int64 would wrap; treat it as absent.
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return 0;
  return v->get<int64_t>();
}

const json& ObjectField(const json& object, std::string_view key) {
  static const json kEmpty = json::object();
  const json* v = FindField(object, key);
  return v != nullptr && v->is_object() ? *v : kEmpty;
}

const json& ArrayField(const json& object, std::string_view key) {
  static const json kEmpty = json::array();
  const json* v = FindField(object, key);
  return v != nullptr && v->is_array() ? *v : kEmpty;
}

}  // namespace nvdra::kube
