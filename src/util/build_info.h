// What a binary was built from, for --version and the startup line: the
// project version, the commit (12 hex digits) and that commit's date
// (ISO 8601), or "unknown" outside a git checkout.
#pragma once

namespace nvdra {

const char* BuildVersion();
const char* BuildCommit();
const char* BuildDate();

}  // namespace nvdra
