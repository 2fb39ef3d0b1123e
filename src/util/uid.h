// Validation of identifiers that reach file names. Claim UIDs come from the
// kubelet and end up in ledger keys and CDI spec file names, so anything that
// is not a plausible Kubernetes UID (or could escape a directory) is refused.
#pragma once

#include <string_view>

#include "util/status.h"

namespace nvdra {

// Kubernetes UIDs are RFC 4122 UUIDs in practice; we accept 1 to 128
// characters of [A-Za-z0-9-], starting and ending with a letter or digit.
// No '/', no '.', so no path traversal and no hidden files.
bool IsValidClaimUid(std::string_view uid);

// OK, or InvalidArgument naming the offending value.
Status ValidateClaimUid(std::string_view uid);

// DNS-1123 subdomain (namespaces, object names): [a-z0-9.-], at most 253.
bool IsValidObjectName(std::string_view name);

}  // namespace nvdra
