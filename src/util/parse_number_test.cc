#include "util/parse_number.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

namespace nvdra {
namespace {

using ::testing::HasSubstr;

TEST(ParseNumberTest, AcceptsWholeNumbers) {
  EXPECT_EQ(*ParseInt64("0"), 0);
  EXPECT_EQ(*ParseInt64("-42"), -42);
  EXPECT_EQ(*ParseInt64("+42"), 42);
  EXPECT_EQ(*ParseInt64("9223372036854775807"), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(*ParseUint64("18446744073709551615"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(*ParseInt32("-2147483648"), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(*ParseUint32("0755", 8), 0755u);
  EXPECT_EQ(*ParseUint32("ff", 16), 255u);
}

TEST(ParseNumberTest, RefusesOutOfRangeInsteadOfThrowing) {
  auto r = ParseInt64("99999999999999999999999");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("out of range for a 64-bit integer"));
  EXPECT_FALSE(ParseInt32("2147483648").ok());
  EXPECT_FALSE(ParseUint32("4294967296").ok());
  EXPECT_FALSE(ParseDouble("1e999").ok());
}

TEST(ParseNumberTest, RefusesJunk) {
  for (const char* bad : {"", "+", "-", "abc", "12abc", " 12", "12 ", "+-1", "++1", "1.5", "0x10"}) {
    auto r = ParseInt64(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) EXPECT_THAT(r.status().message(), HasSubstr("is not a 64-bit integer")) << bad;
  }
  EXPECT_FALSE(ParseUint64("-1").ok());
  EXPECT_FALSE(ParseUint32("-0").ok());
  EXPECT_FALSE(ParseDouble("1.5x").ok());
  EXPECT_FALSE(ParseDouble("nanx").ok());
  EXPECT_FALSE(ParseInt64("1", 1).ok());
}

TEST(ParseNumberTest, LongInputIsShortenedInTheMessage) {
  std::string huge(1000, '7');
  huge += "x";
  auto r = ParseUint64(huge);
  ASSERT_FALSE(r.ok());
  EXPECT_LT(r.status().message().size(), 200u);
}

TEST(ParseNumberTest, ParsesDoubles) {
  EXPECT_DOUBLE_EQ(*ParseDouble("1"), 1.0);
  EXPECT_DOUBLE_EQ(*ParseDouble("-0.5"), -0.5);
  EXPECT_DOUBLE_EQ(*ParseDouble("+2e9"), 2e9);
  EXPECT_DOUBLE_EQ(*ParseDouble(".5"), 0.5);
  EXPECT_DOUBLE_EQ(*ParseDouble("5."), 5.0);
  EXPECT_DOUBLE_EQ(*ParseDouble("1E3"), 1000.0);
}

TEST(ParseNumberTest, TrimSpace) {
  EXPECT_EQ(TrimSpace("  12\t\n"), "12");
  EXPECT_EQ(TrimSpace(" \t "), "");
  EXPECT_EQ(TrimSpace("a b"), "a b");
}

}  // namespace
}  // namespace nvdra
