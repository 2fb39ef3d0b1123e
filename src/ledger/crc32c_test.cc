// The record checksum: the CPU's instruction and the tables must agree bit
// for bit, or a file written on one machine would read as damage on another.
#include "ledger/crc32c.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace nvdra::ledger {
namespace {

TEST(Crc32cTest, KnownValues) {
  // The check value of CRC-32C (RFC 3720, appendix B.4 has more).
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32cExtendPortable(0, "123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(""), 0u);
}

TEST(Crc32cTest, EveryLengthAndSplitMatchesTheTables) {
  std::mt19937 rng(7);
  std::string data(300, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  for (size_t len = 0; len <= data.size(); ++len) {
    std::string_view d(data.data(), len);
    const uint32_t want = Crc32cExtendPortable(0, d);
    ASSERT_EQ(Crc32c(d), want) << "length " << len;
    size_t split = len / 3;
    ASSERT_EQ(Crc32cExtend(Crc32cExtend(0, d.substr(0, split)), d.substr(split)), want) << "length " << len;
  }
}

}  // namespace
}  // namespace nvdra::ledger
