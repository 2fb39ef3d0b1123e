// Reading and writing JSON the way the Go driver's encoding/json does, for
// its checkpoint.json (legacy_checkpoint.h) and the kinds' KindCodec: keys
// match case-insensitively on read; strings are written with Go's escapes.
#pragma once

#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ledger/claim_entry.h"

namespace nvdra::ledger {

// Whether `key` names `name` as Go's encoding/json matches it (ASCII case
// folded).
bool GoKeyIs(std::string_view key, std::string_view name);

// The first member of `obj` that one of `names` matches (tried in order; the
// oldest files used protobuf-style snake_case names), or nullptr.
const nlohmann::json* GoField(const nlohmann::json& obj, std::initializer_list<const char*> names);
// GoField as a string ("" when absent or not a string).
std::string GoStr(const nlohmann::json& obj, std::initializer_list<const char*> names);
// GoField as a list of its string members.
std::vector<std::string> GoStrList(const nlohmann::json& obj, std::initializer_list<const char*> names);

void AppendGoString(std::string& out, std::string_view s);
std::string GoString(std::string_view s);
std::string GoStringList(const std::vector<std::string>& v);
// An allocation result's consumedCapacity (map[QualifiedName]Quantity): the
// keys sorted, as Go marshals a map, each quantity as the API server wrote
// it, which is its canonical text, so a release re-marshals it unchanged.
std::string GoConsumedCapacity(const std::map<std::string, std::string>& consumed);

// A CheckpointedDevice: the same layout as the kubelet plugin library's Device.
std::string GoCheckpointedDevice(const PreparedDevice& d);

}  // namespace nvdra::ledger
