#include "kube/json_fields.h"

#include <gtest/gtest.h>

namespace nvdra::kube {
namespace {

using nlohmann::json;

TEST(JsonFieldsTest, ReadsFieldsOfTheRightType) {
  json j = json::parse(R"({"s":"x","i":-7,"o":{"a":1},"a":[1,2]})");
  EXPECT_EQ(StringField(j, "s"), "x");
  EXPECT_EQ(IntField(j, "i"), -7);
  EXPECT_EQ(ObjectField(j, "o")["a"], 1);
  EXPECT_EQ(ArrayField(j, "a").size(), 2u);
  ASSERT_NE(FindField(j, "s"), nullptr);
  EXPECT_EQ(FindField(j, "missing"), nullptr);
}

TEST(JsonFieldsTest, WrongTypesAndNonObjectsReadAsEmptyWithoutThrowing) {
  json j = json::parse(R"({"s":5,"i":"7","o":[1],"a":{"x":1},"n":null,"big":18446744073709551615,"f":1.5})");
  EXPECT_EQ(StringField(j, "s"), "");
  EXPECT_EQ(IntField(j, "i"), 0);
  EXPECT_EQ(IntField(j, "big"), 0);
  EXPECT_EQ(IntField(j, "f"), 0);
  EXPECT_TRUE(ObjectField(j, "o").is_object());
  EXPECT_TRUE(ObjectField(j, "o").empty());
  EXPECT_TRUE(ArrayField(j, "a").is_array());
  EXPECT_TRUE(ArrayField(j, "a").empty());
  EXPECT_EQ(StringField(j, "n"), "");
  for (const json& odd : {json(nullptr), json(3), json("text"), json::array({1})}) {
    EXPECT_EQ(FindField(odd, "s"), nullptr);
    EXPECT_EQ(StringField(odd, "s"), "");
    EXPECT_TRUE(ObjectField(odd, "o").empty());
    EXPECT_TRUE(ArrayField(odd, "a").empty());
  }
}

}  // namespace
}  // namespace nvdra::kube
