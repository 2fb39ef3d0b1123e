#include "ledger/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
#include <arm_acle.h>
#endif

namespace nvdra::ledger {
namespace {

// Slicing-by-8 tables; built once at compile time.
constexpr std::array<std::array<uint32_t, 256>, 8> MakeTables() {
  std::array<std::array<uint32_t, 256>, 8> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i) {
    for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
  }
  return t;
}

constexpr auto kTables = MakeTables();

// The portable form, for CPUs without a CRC32C instruction. `c` is the
// inverted running value, as in the instructions' convention.
uint32_t ExtendPortable(uint32_t c, const unsigned char* p, size_t n) {
  while (n >= 8) {
    uint32_t lo = c ^ (uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24);
    uint32_t hi = uint32_t(p[4]) | uint32_t(p[5]) << 8 | uint32_t(p[6]) << 16 | uint32_t(p[7]) << 24;
    c = kTables[7][lo & 0xFF] ^ kTables[6][(lo >> 8) & 0xFF] ^ kTables[5][(lo >> 16) & 0xFF] ^ kTables[4][lo >> 24] ^
        kTables[3][hi & 0xFF] ^ kTables[2][(hi >> 8) & 0xFF] ^ kTables[1][(hi >> 16) & 0xFF] ^ kTables[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) c = kTables[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
  return c;
}

// The same polynomial in one instruction per 8 bytes where the CPU has it
// (SSE4.2 on x86-64, checked at run time; the CRC extension on ARMv8, where
// the compiler was told it is there). Same values as the tables, bit for bit.
#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t ExtendHardware(uint32_t c, const unsigned char* p, size_t n) {
  uint64_t c64 = c;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c64 = _mm_crc32_u64(c64, v);
    p += 8;
    n -= 8;
  }
  c = static_cast<uint32_t>(c64);
  while (n-- > 0) c = _mm_crc32_u8(c, *p++);
  return c;
}
const bool kHaveHardware = __builtin_cpu_supports("sse4.2");
#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
uint32_t ExtendHardware(uint32_t c, const unsigned char* p, size_t n) {
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = __crc32cd(c, v);
    p += 8;
    n -= 8;
  }
  while (n-- > 0) c = __crc32cb(c, *p++);
  return c;
}
constexpr bool kHaveHardware = true;
#else
uint32_t ExtendHardware(uint32_t c, const unsigned char* p, size_t n) { return ExtendPortable(c, p, n); }
constexpr bool kHaveHardware = false;
#endif

}  // namespace

uint32_t Crc32cExtend(uint32_t crc, std::string_view data) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  return ~(kHaveHardware ? ExtendHardware(~crc, p, data.size()) : ExtendPortable(~crc, p, data.size()));
}

uint32_t Crc32cExtendPortable(uint32_t crc, std::string_view data) {
  return ~ExtendPortable(~crc, reinterpret_cast<const unsigned char*>(data.data()), data.size());
}

}  // namespace nvdra::ledger
