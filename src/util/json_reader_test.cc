#include "util/json_reader.h"

#include <gtest/gtest.h>

#include <string>

#include "util/json_depth.h"

namespace nvdra {
namespace {

using nlohmann::json;

TEST(JsonReaderTest, ReadsFieldsOfTheRightType) {
  json j = json::parse(R"({"s":"x","b":true,"i":-7,"u":7,"d":1.5,"l":["a","b"],"o":{"k":1}})");
  JsonReader r(j);
  EXPECT_EQ(*r.Required<std::string>("s"), "x");
  EXPECT_TRUE(*r.Required<bool>("b"));
  EXPECT_EQ(*r.Required<int64_t>("i"), -7);
  EXPECT_EQ(*r.Required<int>("i"), -7);
  EXPECT_EQ(*r.Required<uint64_t>("u"), 7u);
  EXPECT_EQ(*r.Required<double>("d"), 1.5);
  EXPECT_EQ(*r.Required<double>("i"), -7.0);
  EXPECT_EQ(*r.Required<std::vector<std::string>>("l"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(*r.Required<json>("o"), json::parse(R"({"k":1})"));
  EXPECT_EQ(*r.Field("o").Required<int>("k"), 1);
  EXPECT_EQ(**r.Optional<std::string>("s"), "x");
  EXPECT_EQ(*r.OptionalOr<std::string>("s", "fallback"), "x");
}

TEST(JsonReaderTest, WrongTypesAreErrorsNamingThePath) {
  json j = json::parse(R"({"s":5,"b":"yes","i":"7","f":1.5,"l":["a",3],"o":[]})");
  JsonReader r(j);
  auto s = r.Required<std::string>("s");
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(), "s: expected a string, got a number (5)");
  EXPECT_EQ(r.Optional<bool>("b").status().message(), "b: expected a boolean, got a string");
  EXPECT_EQ(r.Optional<int64_t>("i").status().message(), "i: expected an integer, got a string");
  EXPECT_EQ(r.Optional<int64_t>("f").status().message(), "f: expected an integer, got a number (1.5)");
  EXPECT_EQ(r.Optional<std::vector<std::string>>("l").status().message(), "l[1]: expected a string, got a number (3)");
  EXPECT_EQ(r.Optional<std::vector<std::string>>("s").status().message(),
            "s: expected an array of strings, got a number (5)");
  EXPECT_EQ(r.Field("o").Optional<std::string>("x").status().message(), "o: expected an object, got an array");
  // OptionalOr falls back for absence only, never for a wrong type.
  EXPECT_FALSE(r.OptionalOr<std::string>("s", "fallback").ok());
}

TEST(JsonReaderTest, AbsentAndNullAreAbsent) {
  json j = json::parse(R"({"n":null})");
  JsonReader r(j);
  for (const char* key : {"n", "missing"}) {
    auto opt = r.Optional<std::string>(key);
    ASSERT_TRUE(opt.ok()) << key;
    EXPECT_FALSE(opt->has_value()) << key;
    EXPECT_FALSE(r.Has(key)) << key;
    EXPECT_EQ(r.Find(key), nullptr) << key;
    EXPECT_EQ(*r.OptionalOr<int64_t>(key, 9), 9) << key;
    auto req = r.Required<std::string>(key);
    EXPECT_EQ(req.status().message(), std::string(key) + ": required field is missing");
    int calls = 0;
    EXPECT_TRUE(r.ForEach(key, [&](const JsonReader&) {
                   ++calls;
                   return Status::Ok();
                 }).ok());
    EXPECT_EQ(calls, 0);
  }
  EXPECT_TRUE(r.Field("missing").IsNull());
  EXPECT_EQ(r.Field("missing").path(), "missing");
}

TEST(JsonReaderTest, NestedPathsInMessages) {
  json j = json::parse(R"({"status":{"allocation":{"devices":{"results":[
      {"pool":"p"},{"pool":"p"},{"pool":7}]}}}})");
  JsonReader root(j);
  JsonReader devices = root.Field("status").Field("allocation").Field("devices");
  EXPECT_EQ(devices.path(), "status.allocation.devices");
  std::vector<std::string> paths;
  Status s = devices.ForEach("results", [&](const JsonReader& item) -> Status {
    paths.push_back(item.path());
    NVDRA_ASSIGN_OR_RETURN(std::string pool, item.Required<std::string>("pool"));
    return Status::Ok();
  });
  EXPECT_EQ(s.message(), "status.allocation.devices.results[2].pool: expected a string, got a number (7)");
  EXPECT_EQ(paths,
            (std::vector<std::string>{"status.allocation.devices.results[0]", "status.allocation.devices.results[1]",
                                      "status.allocation.devices.results[2]"}));
  // The first error stops the walk.
  paths.clear();
  s = devices.ForEach("results", [&](const JsonReader& item) -> Status {
    paths.push_back(item.path());
    return item.Invalid("refused");
  });
  EXPECT_EQ(s.message(), "status.allocation.devices.results[0]: refused");
  EXPECT_EQ(paths.size(), 1u);
  // An item of the wrong kind is named by its index.
  json items = json::parse(R"({"a":[{"x":"1"},null]})");
  s = JsonReader(items).ForEach("a", [](const JsonReader& item) { return item.Optional<std::string>("x").status(); });
  EXPECT_EQ(s.message(), "a[1]: expected an object, got null");
  EXPECT_EQ(JsonReader(items).ForEach("a", [](const JsonReader&) { return Status::Ok(); }).code(), StatusCode::kOk);
  json not_array = json::parse(R"({"a":{"x":1}})");
  EXPECT_EQ(JsonReader(not_array).ForEach("a", [](const JsonReader&) { return Status::Ok(); }).message(),
            "a: expected an array, got an object");
}

TEST(JsonReaderTest, HugeNumbersAreRangeChecked) {
  json j = json::parse(R"({"max":18446744073709551615,"big":9223372036854775808,"i64max":9223372036854775807,
                           "min":-9223372036854775808,"int":2147483648,"neg":-1,"huge":1e300,"e20":100000000000000000000})");
  JsonReader r(j);
  EXPECT_EQ(r.Required<int64_t>("max").status().message(),
            "max: expected an integer in [-9223372036854775808, 9223372036854775807], got a number "
            "(18446744073709551615)");
  EXPECT_FALSE(r.Required<int64_t>("big").ok());
  EXPECT_EQ(*r.Required<int64_t>("i64max"), INT64_MAX);
  EXPECT_EQ(*r.Required<int64_t>("min"), INT64_MIN);
  EXPECT_EQ(*r.Required<uint64_t>("max"), UINT64_MAX);
  EXPECT_FALSE(r.Required<uint64_t>("neg").ok());
  EXPECT_FALSE(r.Required<int>("int").ok());
  EXPECT_FALSE(r.Required<int>("min").ok());
  EXPECT_EQ(*r.Required<int64_t>("int"), 2147483648);
  // Beyond 64 bits nlohmann keeps a double: not an integer.
  EXPECT_NE(r.Required<int64_t>("e20").status().message().find("e20: expected an integer, got a number"),
            std::string::npos);
  EXPECT_FALSE(r.Required<uint64_t>("e20").ok());
  EXPECT_TRUE(r.Required<double>("huge").ok());
  EXPECT_FALSE(r.Required<int64_t>("huge").ok());
  // A number no double holds is refused by the parse, as a value.
  EXPECT_EQ(ParseJsonText(R"({"x":1e400})", "doc").status().message(), "doc is not valid JSON");
}

TEST(JsonReaderTest, NonObjectRootsAreErrorsNotExceptions) {
  for (const json& odd : {json(nullptr), json(3), json("text"), json::array({1}), json(true)}) {
    JsonReader r(odd);
    EXPECT_FALSE(r.ExpectObject().ok()) << odd.dump();
    EXPECT_EQ(r.ExpectObject().message().rfind("expected an object, got ", 0), 0u) << r.ExpectObject().message();
    EXPECT_FALSE(r.Optional<std::string>("s").ok()) << odd.dump();
    EXPECT_FALSE(r.Required<std::string>("s").ok()) << odd.dump();
    EXPECT_FALSE(r.ForEach("a", [](const JsonReader&) { return Status::Ok(); }).ok()) << odd.dump();
    EXPECT_EQ(r.Find("s"), nullptr);
    EXPECT_EQ(r.ValueOr<std::string>("s", "fallback"), "fallback");
    EXPECT_TRUE(r.Unknown({}).empty());
  }
  EXPECT_EQ(JsonReader(json::array(), "spec").ExpectObject().message(), "spec: expected an object, got an array");
  EXPECT_EQ(JsonReader(json(1)).ForEachItem([](const JsonReader&) { return Status::Ok(); }).message(),
            "expected an array, got a number (1)");
}

TEST(JsonReaderTest, OptionalObjects) {
  json j = json::parse(R"({"meta":{"name":"n"},"list":[],"n":null})");
  JsonReader r(j, "claim");
  auto meta = r.OptionalObject("meta");
  ASSERT_TRUE(meta.ok());
  ASSERT_TRUE(meta->has_value());
  EXPECT_EQ((*meta)->path(), "claim.meta");
  EXPECT_EQ(*(*meta)->Required<std::string>("name"), "n");
  EXPECT_FALSE(r.OptionalObject("n")->has_value());
  EXPECT_FALSE(r.OptionalObject("missing")->has_value());
  EXPECT_EQ(r.OptionalObject("list").status().message(), "claim.list: expected an object, got an array");
}

TEST(JsonReaderTest, ValueOrIsBestEffort) {
  json j = json::parse(R"({"s":5,"t":"x","n":null})");
  JsonReader r(j);
  EXPECT_EQ(r.ValueOr<std::string>("s", "d"), "d");
  EXPECT_EQ(r.ValueOr<std::string>("t", "d"), "x");
  EXPECT_EQ(r.ValueOr<std::string>("n", "d"), "d");
  EXPECT_EQ(r.ValueOr<int64_t>("t", 4), 4);
}

TEST(JsonReaderTest, UnknownMembersSurviveARoundTrip) {
  json j = json::parse(R"({"version":1,"devices":[],"mps":{"x":1},"extra":"y"})");
  json unknown = JsonReader(j).Unknown({"version", "devices"});
  EXPECT_EQ(unknown, json::parse(R"({"mps":{"x":1},"extra":"y"})"));
  json out = {{"version", 2}, {"extra", "ours"}};
  MergeUnknownMembers(out, unknown);
  EXPECT_EQ(out, json::parse(R"({"version":2,"extra":"ours","mps":{"x":1}})")) << "what out sets wins";
}

TEST(JsonReaderTest, CaseInsensitiveKeysForFilesGoWrote) {
  json j = json::parse(R"({"DeviceName":"gpu-0","Extra":1})");
  JsonReader exact(j);
  EXPECT_FALSE(exact.Has("devicename"));
  JsonReader loose(j, "", JsonKeyMatch::kCaseInsensitive);
  EXPECT_EQ(*loose.Required<std::string>("deviceName"), "gpu-0");
  EXPECT_EQ(loose.Unknown({"devicename"}), json::parse(R"({"Extra":1})"));
}

TEST(JsonReaderTest, ParseJsonTextChecksDepthAndSyntax) {
  auto ok = ParseJsonText(R"({"a":[1]})", "thing");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)["a"][0], 1);
  EXPECT_EQ(ParseJsonText("{nope", "thing").status().message(), "thing is not valid JSON");
  std::string deep(kMaxJsonDepth + 1, '[');
  deep += std::string(kMaxJsonDepth + 1, ']');
  auto too_deep = ParseJsonText(deep, "thing");
  EXPECT_EQ(too_deep.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_deep.status().message().find("thing nests arrays or objects deeper than"), std::string::npos);
}

}  // namespace
}  // namespace nvdra
