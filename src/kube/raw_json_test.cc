#include "kube/raw_json.h"

#include <gtest/gtest.h>

namespace nvdra::kube {
namespace {

TEST(RawJsonTest, FindsNestedValueVerbatim) {
  std::string doc = R"({"a": {"skip": [1, "x]}", {"y": "}"}], "b" : [ {"c":1}, { "p" :  {"z":  1.50, "u":"\u00e9"} } ]}})";
  auto v = FindRawJson(doc, {"a", "b", size_t{1}, "p"});
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, R"({"z":  1.50, "u":"\u00e9"})");
  EXPECT_EQ(*FindRawJson(doc, {"a", "b", size_t{0}, "c"}), "1");
}

TEST(RawJsonTest, MissingPaths) {
  std::string doc = R"({"a": [1, 2], "k\"q": true})";
  EXPECT_FALSE(FindRawJson(doc, {"b"}).has_value());
  EXPECT_FALSE(FindRawJson(doc, {"a", size_t{2}}).has_value());
  EXPECT_FALSE(FindRawJson(doc, {"a", "x"}).has_value());
  EXPECT_EQ(*FindRawJson(doc, {"k\"q"}), "true");
  EXPECT_EQ(*FindRawJson(R"({"a":1,"a":{"b":2}})", {"a", "b"}), "2");  // last duplicate wins
  EXPECT_FALSE(FindRawJson(R"({"a":1 "b":2})", {"b"}).has_value());
}

}  // namespace
}  // namespace nvdra::kube
