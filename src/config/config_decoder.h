// Decoding of opaque config parameters (the raw JSON bytes of
// `opaque.parameters`) into config values, with the behaviour of the
// Kubernetes JSON serializer that upstream uses: apiVersion/kind select one of
// the registered kinds (config/config_kind.h), keys are case-sensitive, and in strict mode unknown and duplicate
// fields are reported with their path, e.g.
//   strict decoding error: unknown field "sharing.foo", duplicate field "kind"
#pragma once

#include <string_view>

#include "config/opaque_config.h"
#include "util/status.h"

namespace nvdra::config {

// For user input (claims, classes). Any unknown or duplicate field, wrong
// JSON type, bad quantity, missing or unregistered apiVersion/kind is an
// InvalidArgument error whose message names the field.
Result<Config> DecodeStrict(std::string_view json);

// For data this driver wrote earlier, possibly by an older or newer version
// (the ledger's undo records). Unknown and duplicate fields are ignored and
// a field of the wrong type is skipped, so only a document without a known
// apiVersion/kind, or one that is not JSON, fails.
Result<Config> DecodeLenient(std::string_view json);

}  // namespace nvdra::config
