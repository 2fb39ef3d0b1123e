// Tolerant reads of objects the API server sends (lists, Nodes, slices): a
// field that is missing, null or of another type reads as its empty value.
// nlohmann's value() and get() throw on a type mismatch instead; these never
// throw, so one odd object cannot end a sync or a thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace nvdra::kube {

// The field `key` of `object`, or nullptr when `object` is not an object or
// has no such field.
const nlohmann::json* FindField(const nlohmann::json& object, std::string_view key);

// The field when it has the named type, else "" / 0 / an empty object or array.
std::string StringField(const nlohmann::json& object, std::string_view key);
int64_t IntField(const nlohmann::json& object, std::string_view key);
const nlohmann::json& ObjectField(const nlohmann::json& object, std::string_view key);
const nlohmann::json& ArrayField(const nlohmann::json& object, std::string_view key);

}  // namespace nvdra::kube
