// Checked number parsing for text from outside the process (files under /proc
// and /sys, HTTP headers, user config, persisted records). Never throws: the
// whole text must be one number of the requested type, else the Result says
// why ("not a number", "out of range"). Callers add where the text came from.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/status.h"

namespace nvdra {

// Decimal (or `base` 2..36) integer, optional leading '-' (signed types only)
// or '+'. No spaces, no trailing characters.
Result<int64_t> ParseInt64(std::string_view text, int base = 10);
Result<uint64_t> ParseUint64(std::string_view text, int base = 10);
Result<int32_t> ParseInt32(std::string_view text, int base = 10);
Result<uint32_t> ParseUint32(std::string_view text, int base = 10);

// Decimal floating point ("1", "-0.5", "2e9", ".5"), optional leading '+'.
// Values beyond double's range are errors, not infinities.
Result<double> ParseDouble(std::string_view text);

// `text` without leading and trailing spaces, tabs and line ends.
std::string_view TrimSpace(std::string_view text);

}  // namespace nvdra
