#include "util/json_reader.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <type_traits>

#include "util/json_depth.h"

namespace nvdra {

using nlohmann::json;

namespace {

Status WrongType(const std::string& path, std::string_view want, const json& got) {
  std::string problem = "expected " + std::string(want) + ", got " + std::string(JsonTypeWithArticle(got));
  // A number's text tells which number was refused (1.5, 1e+20).
  if (got.is_number()) problem += " (" + got.dump() + ")";
  return InvalidArgument(path.empty() ? problem : path + ": " + problem);
}

// An integer of type T, range-checked whatever nlohmann stored it as.
template <typename T>
Result<T> Integer(const json& v, const std::string& path) {
  auto out_of_range = [&] {
    return WrongType(path,
                     "an integer in [" + std::to_string(std::numeric_limits<T>::min()) + ", " +
                         std::to_string(std::numeric_limits<T>::max()) + "]",
                     v);
  };
  if (!v.is_number_integer()) return WrongType(path, "an integer", v);
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return out_of_range();
    return static_cast<T>(u);
  }
  int64_t i = v.get<int64_t>();
  if constexpr (std::is_signed_v<T>) {
    if (i < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        i > static_cast<int64_t>(std::numeric_limits<T>::max())) {
      return out_of_range();
    }
  } else {
    if (i < 0) return out_of_range();
  }
  return static_cast<T>(i);
}

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

bool JsonKeyMatches(std::string_view key, std::string_view want, JsonKeyMatch match) {
  return match == JsonKeyMatch::kCaseInsensitive ? EqualsIgnoringCase(key, want) : key == want;
}

template <typename T>
Result<T> JsonAs(const json& v, const std::string& path) {
  if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) return WrongType(path, "a string", v);
    return v.get<std::string>();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) return WrongType(path, "a boolean", v);
    return v.get<bool>();
  } else if constexpr (std::is_same_v<T, double>) {
    if (!v.is_number()) return WrongType(path, "a number", v);
    return v.get<double>();
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    if (!v.is_array()) return WrongType(path, "an array of strings", v);
    std::vector<std::string> out;
    out.reserve(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string()) return WrongType(path + "[" + std::to_string(i) + "]", "a string", v[i]);
      out.push_back(v[i].get<std::string>());
    }
    return out;
  } else if constexpr (std::is_same_v<T, json>) {
    return v;
  } else {
    return Integer<T>(v, path);
  }
}

template Result<std::string> JsonAs<std::string>(const json&, const std::string&);
template Result<bool> JsonAs<bool>(const json&, const std::string&);
template Result<int64_t> JsonAs<int64_t>(const json&, const std::string&);
template Result<int> JsonAs<int>(const json&, const std::string&);
template Result<uint64_t> JsonAs<uint64_t>(const json&, const std::string&);
template Result<double> JsonAs<double>(const json&, const std::string&);
template Result<std::vector<std::string>> JsonAs<std::vector<std::string>>(const json&, const std::string&);
template Result<json> JsonAs<json>(const json&, const std::string&);

std::string_view JsonTypeWithArticle(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float: return "a number";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    default: return "a binary value";
  }
}

Status JsonReader::InvalidArgumentAt(const std::string& path, std::string_view problem) {
  return InvalidArgument(path.empty() ? std::string(problem) : path + ": " + std::string(problem));
}

Status JsonReader::ExpectObject() const {
  if (value_->is_object()) return Status::Ok();
  return WrongType(path_, "an object", *value_);
}

bool JsonReader::KeyMatches(std::string_view key, std::string_view want) const {
  return JsonKeyMatches(key, want, match_);
}

const json* JsonReader::Find(std::string_view key) const {
  if (!value_->is_object()) return nullptr;
  if (match_ == JsonKeyMatch::kExact) {
    auto it = value_->find(key);
    return it == value_->end() || it->is_null() ? nullptr : &*it;
  }
  for (auto it = value_->begin(); it != value_->end(); ++it) {
    if (KeyMatches(it.key(), key)) return it->is_null() ? nullptr : &*it;
  }
  return nullptr;
}

JsonReader JsonReader::Field(std::string_view key) const {
  static const json kNull;
  const json* v = Find(key);
  return JsonReader(v != nullptr ? *v : kNull, ChildPath(key), match_);
}

Result<std::optional<JsonReader>> JsonReader::OptionalObject(std::string_view key) const {
  NVDRA_RETURN_IF_ERROR(ExpectObject());
  const json* v = Find(key);
  if (v == nullptr) return std::optional<JsonReader>();
  JsonReader child(*v, ChildPath(key), match_);
  NVDRA_RETURN_IF_ERROR(child.ExpectObject());
  return std::optional<JsonReader>(std::move(child));
}

std::string JsonReader::ChildPath(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

std::string JsonReader::ItemPath(size_t index) const { return path_ + "[" + std::to_string(index) + "]"; }

Status JsonReader::ForEach(std::string_view key, const std::function<Status(const JsonReader& item)>& fn) const {
  NVDRA_RETURN_IF_ERROR(ExpectObject());
  const json* v = Find(key);
  if (v == nullptr) return Status::Ok();
  return JsonReader(*v, ChildPath(key), match_).ForEachItem(fn);
}

Status JsonReader::ForEachItem(const std::function<Status(const JsonReader& item)>& fn) const {
  if (!value_->is_array()) return WrongType(path_, "an array", *value_);
  for (size_t i = 0; i < value_->size(); ++i) {
    NVDRA_RETURN_IF_ERROR(fn(JsonReader((*value_)[i], ItemPath(i), match_)));
  }
  return Status::Ok();
}

json JsonReader::Unknown(std::initializer_list<std::string_view> known) const {
  json out = json::object();
  if (!value_->is_object()) return out;
  for (auto it = value_->begin(); it != value_->end(); ++it) {
    bool is_known = std::any_of(known.begin(), known.end(),
                                [&](std::string_view k) { return KeyMatches(it.key(), k); });
    if (!is_known) out[it.key()] = it.value();
  }
  return out;
}

void MergeUnknownMembers(json& out, const json& unknown) {
  if (!unknown.is_object() || !out.is_object()) return;
  for (auto it = unknown.begin(); it != unknown.end(); ++it) {
    if (!out.contains(it.key())) out[it.key()] = it.value();
  }
}

Result<json> ParseJsonText(std::string_view text, std::string_view what) {
  NVDRA_RETURN_IF_ERROR(CheckJsonDepth(text, what));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument(std::string(what) + " is not valid JSON");
  return j;
}

}  // namespace nvdra
