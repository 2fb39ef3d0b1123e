#include "kube/raw_json.h"

#include <gtest/gtest.h>

namespace nvdra::kube {
namespace {

TEST(RawJsonTest, FindsNestedValueVerbatim) {
  std::string doc =
      R"({"a": {"skip": [1, "x]}", {"y": "}"}], "b" : [ {"c":1}, { "p" :  {"z":  1.50, "u":"\u00e9"} } ]}})";
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

TEST(RawJsonTest, ElementsOfAnArrayVerbatim) {
  std::string doc = R"({"x": {"list": [ {"a": "],"} , 2,"s" ,[3, [4]] ], "list": [1, {"b" : 2}]}})";
  auto items = FindRawJsonElements(doc, {"x", "list"});
  ASSERT_TRUE(items.has_value());
  EXPECT_EQ(*items, (std::vector<std::string_view>{"1", R"({"b" : 2})"}));  // the last duplicate wins
  EXPECT_EQ(FindRawJsonElements(R"({"l": []})", {"l"})->size(), 0u);
  EXPECT_FALSE(FindRawJsonElements(R"({"l": {}})", {"l"}).has_value());
  EXPECT_FALSE(FindRawJsonElements(R"({"l": [1 2]})", {"l"}).has_value());
  EXPECT_FALSE(FindRawJsonElements(R"({"m": [1]})", {"l"}).has_value());
}

// What the admission webhook does with a review of many configs: every
// element found in a pass whose reads grow with the document, not with the
// document times the number of elements.
TEST(RawJsonTest, ElementsAreFoundInOnePass) {
  for (size_t n : {10u, 1000u, 4000u}) {
    std::string doc = R"({"request": {"object": {"spec": {"devices": {"config": [)";
    for (size_t i = 0; i < n; ++i) {
      if (i > 0) doc += ",";
      doc += R"({"opaque": {"driver": "gpu.nvidia.com", "parameters": {"kind": "GpuConfig", "i": )" +
             std::to_string(i) + "}}}";
    }
    doc += R"(]}}, "metadata": {"name": "x"}}, "kind": "AdmissionReview"}})";
    size_t read = 0;
    auto items = FindRawJsonElements(doc, {"request", "object", "spec", "devices", "config"}, &read);
    ASSERT_TRUE(items.has_value());
    ASSERT_EQ(items->size(), n);
    EXPECT_EQ(*FindRawJson((*items)[n - 1], {"opaque", "parameters", "i"}), std::to_string(n - 1));
    // Each of the five members on the way is read once more after its
    // object was read whole: at most six reads of each byte.
    EXPECT_LE(read, 6 * doc.size()) << n << " elements";
    EXPECT_GE(read, doc.size()) << n << " elements";
  }
}

}  // namespace
}  // namespace nvdra::kube
