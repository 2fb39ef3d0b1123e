#include "config/json_tree.h"

#include <gtest/gtest.h>

namespace nvdra::config {
namespace {

TEST(JsonTreeTest, KeepsDuplicateKeysInDocumentOrder) {
  auto v = ParseJson(R"({"b":1,"a":"x","b":2})");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_EQ(v->type, JsonValue::Type::kObject);
  ASSERT_EQ(v->members.size(), 3u);
  EXPECT_EQ(v->members[0].first, "b");
  EXPECT_EQ(v->members[0].second.text, "1");
  EXPECT_EQ(v->members[1].first, "a");
  EXPECT_EQ(v->members[1].second.text, "x");
  EXPECT_EQ(v->members[2].first, "b");
  EXPECT_EQ(v->members[2].second.text, "2");
}

TEST(JsonTreeTest, NumbersRememberWhetherTheyAreIntegers) {
  auto v = ParseJson(R"([50, -3, 50.0, 1e2, 18446744073709551615, null, true])");
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->elements.size(), 7u);
  EXPECT_TRUE(v->elements[0].is_integer);
  EXPECT_EQ(v->elements[1].text, "-3");
  EXPECT_FALSE(v->elements[2].is_integer);
  EXPECT_EQ(v->elements[3].text, "1e2");
  EXPECT_FALSE(v->elements[4].is_integer);  // beyond int64
  EXPECT_EQ(v->elements[5].type, JsonValue::Type::kNull);
  EXPECT_TRUE(v->elements[6].boolean);
  EXPECT_EQ(v->elements[6].TypeName(), "bool");
}

TEST(JsonTreeTest, DeepNestingIsRefusedNotACrash) {
  std::string deep(200000, '[');
  auto v = ParseJson(deep);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("nesting is deeper than 64 levels"), std::string::npos);

  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += R"({"a":)";
  EXPECT_FALSE(ParseJson(objects).ok());
}

TEST(JsonTreeTest, OversizedInputIsRefused) {
  std::string big = "\"" + std::string(2 << 20, 'x') + "\"";
  auto v = ParseJson(big);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("more than the 1048576 bytes accepted"), std::string::npos);
  JsonParseLimits roomy;
  roomy.max_bytes = 4 << 20;
  EXPECT_TRUE(ParseJson(big, roomy).ok());
}

TEST(JsonTreeTest, SyntaxErrorsSayWhere) {
  for (const char* bad : {"", "{", "{\"a\":}", "[1,]", "{'a':1}", "nul", "{\"a\":1} x"}) {
    auto v = ParseJson(bad);
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(v.status().message().rfind("json parse error: ", 0), 0u) << v.status().message();
    EXPECT_EQ(v.status().message().find("[json.exception"), std::string::npos);
  }
}

}  // namespace
}  // namespace nvdra::config
