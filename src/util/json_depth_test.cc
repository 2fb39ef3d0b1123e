#include "util/json_depth.h"

#include <gtest/gtest.h>

#include <string>

namespace nvdra {
namespace {

TEST(JsonDepthTest, CountsBracketsOutsideStrings) {
  EXPECT_EQ(JsonNestingDepth("1", 10), 0u);
  EXPECT_EQ(JsonNestingDepth("{}", 10), 1u);
  EXPECT_EQ(JsonNestingDepth(R"({"a":[{"b":[]}],"c":{}})", 10), 4u);
  // Brackets and escaped quotes inside strings do not count.
  EXPECT_EQ(JsonNestingDepth(R"({"[[[[": "\"{{{{", "x": ["]]]"]})", 10), 2u);
  // Stops at the limit.
  EXPECT_EQ(JsonNestingDepth(std::string(1000, '['), 5), 6u);
}

TEST(JsonDepthTest, CountsValuesWithoutParsing) {
  EXPECT_EQ(CountJsonValues("1", 100), 1u);
  EXPECT_EQ(CountJsonValues("[]", 100), 1u);
  EXPECT_EQ(CountJsonValues("[1, 2, {}]", 100), 4u);
  EXPECT_EQ(CountJsonValues(R"({"a": [1, {"b": "x,[y"}], "c": {}})", 100), 6u);
  // Stops once past the limit.
  std::string many = "[";
  for (int i = 0; i < 10000; ++i) many += "{},";
  many += "{}]";
  EXPECT_EQ(CountJsonValues(many, 50), 51u);
}

TEST(JsonDepthTest, RefusesDeepDocumentsWithAClearError) {
  std::string deep = std::string(70'000, '[') + std::string(70'000, ']');
  Status s = CheckJsonDepth(deep, "ResourceClaim default/c");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ResourceClaim default/c nests arrays or objects deeper than 256 levels"),
            std::string::npos)
      << s.message();
  std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(CheckJsonDepth(ok, "x").ok());
  EXPECT_FALSE(CheckJsonDepth("[" + ok + "]", "x").ok());
}

}  // namespace
}  // namespace nvdra
