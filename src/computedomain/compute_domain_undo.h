// The ComputeDomain kind's undo record: the domain, the channels and whether
// the claim is the domain's IMEX daemon (Unprepare removes the daemon's
// directory). Read by Prepare, by the spec rebuild of a repeated Prepare and
// by Unprepare alike.
//
// On disk: {"version": 1, "domainID": "<uid>", "channels": [{"device": "channel-3", "id": 3}],
//           "daemon": false, "allChannels": false,
//           "domainName": "...", "domainNamespace": "..."}   (the last two for daemons)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/status.h"

namespace nvdra::computedomain {

inline constexpr int kComputeDomainUndoVersion = 1;

struct ChannelUndo {
  std::string device;  // "channel-3"
  int id = 0;
  nlohmann::json unknown = nlohmann::json::object();
  friend bool operator==(const ChannelUndo&, const ChannelUndo&) = default;
};

struct ComputeDomainUndo {
  int64_t version = kComputeDomainUndoVersion;
  std::string domain_id;
  std::vector<ChannelUndo> channels;
  bool daemon = false;
  bool all_channels = false;
  // Known once the daemon's claim was prepared (the CDI edits carry them).
  std::optional<std::string> domain_name;
  std::optional<std::string> domain_namespace;
  nlohmann::json unknown = nlohmann::json::object();  // fields of a newer version
  friend bool operator==(const ComputeDomainUndo&, const ComputeDomainUndo&) = default;
};

nlohmann::json EncodeComputeDomainUndo(const ComputeDomainUndo& undo);
// Null (no record) decodes as an empty record; a record of the wrong shape
// (not an object, a field or channel of the wrong type) is InvalidArgument.
Result<ComputeDomainUndo> DecodeComputeDomainUndo(const nlohmann::json& j);

}  // namespace nvdra::computedomain
