// CRC32C (Castagnoli), the checksum that frames every ledger record. It is
// computed over the exact bytes on disk so a schema change can never make an
// old file look corrupt.
#pragma once

#include <cstdint>
#include <string_view>

namespace nvdra::ledger {

// Extends `crc` (0 to start) with `data`: with the CPU's CRC32C
// instruction where it has one, else with tables.
uint32_t Crc32cExtend(uint32_t crc, std::string_view data);
// The table form alone, whatever the CPU: the tests compare the two.
uint32_t Crc32cExtendPortable(uint32_t crc, std::string_view data);

inline uint32_t Crc32c(std::string_view data) { return Crc32cExtend(0, data); }

}  // namespace nvdra::ledger
