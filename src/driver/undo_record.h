// Typed, tolerant reads of a device kind's undo record (the JSON the ledger
// keeps per claim). Records outlive binaries: a newer version may have added
// fields, an older one may lack some, and a damaged or hand-edited ledger
// may hold anything. So a missing field reads as absent, a field of the
// wrong type is an error value naming it (never an exception), and fields a
// kind does not know are collected so that re-encoding keeps them.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace nvdra::driver::undo {

// One JSON object being decoded; `what` names it in errors ("GPU undo record").
class Fields {
 public:
  // InvalidArgument when `j` is not an object.
  static Result<Fields> Of(const nlohmann::json& j, std::string what);

  Result<std::optional<std::string>> String(const char* key) const;
  Result<std::optional<int64_t>> Int(const char* key) const;
  Result<std::optional<bool>> Bool(const char* key) const;
  Result<std::vector<std::string>> Strings(const char* key) const;  // absent: empty
  // The array under `key` (absent: empty); items are the caller's to decode.
  Result<nlohmann::json> Array(const char* key) const;

  // The members whose keys are not in `known`, for a lossless re-encode.
  nlohmann::json Unknown(std::initializer_list<const char*> known) const;

 private:
  Fields(const nlohmann::json& j, std::string what) : j_(&j), what_(std::move(what)) {}
  const nlohmann::json* Find(const char* key) const;
  Status WrongType(const char* key, const char* want) const;

  const nlohmann::json* j_;
  std::string what_;
};

// `out` with the members of `unknown` that `out` does not set itself.
void MergeUnknown(nlohmann::json& out, const nlohmann::json& unknown);

}  // namespace nvdra::driver::undo
