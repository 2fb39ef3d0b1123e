#include "kube/resource_claim.h"
#include "util/test_paths.h"

#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "util/file_util.h"

namespace nvdra::kube {
namespace {

std::string Fixture(const std::string& name) {
  auto text = ReadFileToString(std::string(NVDRA_SHARED_DIR) + "/fixtures/kubernetes-api/" + name);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : "";
}

class ClaimFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ClaimFixtureTest, DecodesEveryField) {
  std::string text = Fixture("resource.k8s.io." + GetParam() + ".ResourceClaim.json");
  auto c = DecodeResourceClaim(text);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto j = nlohmann::json::parse(text);
  EXPECT_EQ(c->api_version, "resource.k8s.io/" + GetParam());
  EXPECT_EQ(c->uid, j["metadata"]["uid"]);
  EXPECT_EQ(c->name, j["metadata"]["name"]);
  EXPECT_EQ(c->namespace_name, j["metadata"]["namespace"]);
  EXPECT_EQ(c->resource_version, j["metadata"]["resourceVersion"]);
  ASSERT_TRUE(c->allocated);
  const auto& jr = j["status"]["allocation"]["devices"]["results"];
  ASSERT_EQ(c->results.size(), jr.size());
  EXPECT_EQ(c->results[0].request, jr[0]["request"]);
  EXPECT_EQ(c->results[0].driver, jr[0]["driver"]);
  EXPECT_EQ(c->results[0].pool, jr[0]["pool"]);
  EXPECT_EQ(c->results[0].device, jr[0]["device"]);
  EXPECT_EQ(c->results[0].admin_access, jr[0]["adminAccess"].get<bool>());
  EXPECT_EQ(c->results[0].share_id, jr[0]["shareID"].get<std::string>());
  const auto& jc = j["status"]["allocation"]["devices"]["config"];
  ASSERT_EQ(c->configs.size(), jc.size());
  EXPECT_EQ(c->configs[0].source, jc[0]["source"]);
  EXPECT_EQ(c->configs[0].requests, jc[0]["requests"].get<std::vector<std::string>>());
  ASSERT_TRUE(c->configs[0].opaque.has_value());
  EXPECT_EQ(c->configs[0].opaque->driver, jc[0]["opaque"]["driver"]);
  EXPECT_EQ(nlohmann::json::parse(c->configs[0].opaque->parameters), jc[0]["opaque"]["parameters"]);
  // Byte-exact: the raw text appears verbatim in the document.
  EXPECT_NE(text.find(c->configs[0].opaque->parameters), std::string::npos);
  ASSERT_EQ(c->reserved_for.size(), j["status"]["reservedFor"].size());
  EXPECT_EQ(c->reserved_for[0].uid, j["status"]["reservedFor"][0]["uid"]);
  EXPECT_EQ(c->reserved_for[0].resource, j["status"]["reservedFor"][0]["resource"]);
  EXPECT_EQ(nlohmann::json::parse(c->status_json), j["status"]);
}

INSTANTIATE_TEST_SUITE_P(Versions, ClaimFixtureTest, ::testing::Values("v1", "v1beta2", "v1beta1"));

// A claim made from a ResourceClaimTemplate names the pod's entry in an
// annotation (device metadata files are found by it); a malformed one is
// ignored rather than failing the claim.
TEST(ResourceClaimTest, PodClaimNameFromTheAnnotation) {
  auto with = DecodeResourceClaim(R"({"metadata":{"name":"pod-gpu-x7","namespace":"n","uid":"u",
    "annotations":{"resource.kubernetes.io/pod-claim-name":"gpu","other":"x"}}})");
  ASSERT_TRUE(with.ok()) << with.status().ToString();
  EXPECT_EQ(with->pod_claim_name, std::optional<std::string>("gpu"));
  auto without = DecodeResourceClaim(R"({"metadata":{"name":"c","namespace":"n","uid":"u","annotations":{"a":"b"}}})");
  ASSERT_TRUE(without.ok());
  EXPECT_EQ(without->pod_claim_name, std::nullopt);
  auto malformed = DecodeResourceClaim(
      R"({"metadata":{"name":"c","namespace":"n","uid":"u","annotations":{"resource.kubernetes.io/pod-claim-name":1}}})");
  ASSERT_TRUE(malformed.ok()) << malformed.status().ToString();
  EXPECT_EQ(malformed->pod_claim_name, std::nullopt);
}

TEST(ResourceClaimTest, ParametersKeptByteExact) {
  std::string text =
      R"({"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"name":"c","namespace":"n","uid":"u"},
    "status":{"allocation":{"devices":{"results":[{"request":"r","driver":"gpu.nvidia.com","pool":"p","device":"gpu-0"}],
    "config":[{"source":"FromClaim","opaque":{"driver":"gpu.nvidia.com","parameters":{ "kind" : "GpuConfig","x":1.0e2 }}}]}}}})";
  auto c = DecodeResourceClaim(text);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->configs[0].opaque->parameters, R"({ "kind" : "GpuConfig","x":1.0e2 })");
  EXPECT_TRUE(c->configs[0].requests.empty());
  EXPECT_FALSE(c->results[0].admin_access);
  EXPECT_TRUE(c->results[0].share_id.empty());
}

// An answer of another kind is refused from its kind alone, read off the
// text before anything is parsed (the quoted kind in the message says so).
TEST(ResourceClaimTest, AnotherKindIsRefusedBeforeTheAnswerIsParsed) {
  std::string pod = R"({"kind":"Pod","metadata":{"name":"x"},"spec":{"containers":[)";
  for (int i = 0; i < 20000; ++i) pod += std::string(i ? "," : "") + R"({"name":"c","image":"i"})";
  pod += "]}}";
  auto r = DecodeResourceClaim(pod);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "expected kind ResourceClaim, got \"Pod\"");
}

TEST(ResourceClaimTest, NotAllocatedAndErrors) {
  auto c = DecodeResourceClaim(R"({"kind":"ResourceClaim","metadata":{"name":"c","uid":"u"},"status":{}})");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->allocated);
  EXPECT_FALSE(DecodeResourceClaim("{not json").ok());
  EXPECT_EQ(DecodeResourceClaim(R"({"kind":"Pod"})").status().code(), StatusCode::kInvalidArgument);
  auto bad = DecodeResourceClaim(
      R"({"kind":"ResourceClaim","metadata":{"name":"c"},"status":{"allocation":{"devices":{"results":[{"adminAccess":"yes"}]}}}})");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(ResourceClaimTest, ShapeErrorsNameTheOffendingField) {
  auto c = DecodeResourceClaim(
      R"({"kind":"ResourceClaim","metadata":{"name":"c","namespace":"n"},"status":{"allocation":{"devices":{)"
      R"("results":[{"request":"r","driver":"d","pool":"p","device":"g"},{"request":"r","driver":"d","pool":7}]}}}})");
  EXPECT_EQ(c.status().message(),
            "ResourceClaim n/c has an unexpected shape: status.allocation.devices.results[1].pool: expected a string, "
            "got a number (7)");
  c = DecodeResourceClaim(
      R"({"kind":"ResourceClaim","metadata":{"name":"c","namespace":"n"},"status":{"allocation":{"devices":{)"
      R"("config":[{"requests":["a"]},{"requests":["a",false]}]}}}})");
  EXPECT_EQ(c.status().message(),
            "ResourceClaim n/c has an unexpected shape: status.allocation.devices.config[1].requests[1]: expected a "
            "string, got a boolean");
  c = DecodeResourceClaim(R"({"kind":"ResourceClaim","metadata":{"name":"c","namespace":"n"},"status":{)"
                          R"("reservedFor":[{"name":"p"},"pod"]}})");
  EXPECT_EQ(c.status().message(),
            "ResourceClaim n/c has an unexpected shape: status.reservedFor[1]: expected an object, got a string");
  c = DecodeResourceClaim(
      R"({"kind":"ResourceClaim","metadata":{"name":"c","namespace":"n"},"status":{)"
      R"("allocation":{"devices":{"results":[{"request":"r","driver":"","pool":"p","device":"g"}]}}}})");
  EXPECT_EQ(
      c.status().message(),
      "ResourceClaim n/c has an unexpected shape: status.allocation.devices.results[0].driver: must not be empty");
  EXPECT_EQ(DecodeResourceClaim(R"({"kind":5})").status().message(),
            "ResourceClaim / has an unexpected shape: kind: expected a string, got a number (5)");
}

// Results that name no device must fail the decode: a claim read as
// "allocated, zero devices" would be prepared with nothing.
TEST(ResourceClaimTest, MalformedResultsAreErrorsNotZeroDevices) {
  auto with_devices = [](const std::string& devices) {
    return R"({"kind":"ResourceClaim","metadata":{"name":"c","namespace":"n","uid":"u"},)"
           R"("status":{"allocation":{"devices":)" +
           devices + "}}}";
  };
  for (const std::string& devices :
       {std::string(R"({"results":{}})"), std::string(R"({"results":{"request":"r"}})"),
        std::string(R"({"results":[null]})"), std::string(R"({"results":[7]})"), std::string(R"({"results":"gpu-0"})"),
        std::string(R"({"results":[{}]})"), std::string(R"({"results":[{"request":"r","driver":"d","pool":"p"}]})"),
        std::string(R"({"results":[{"request":"r","driver":"d","pool":"p","device":7}]})"),
        std::string(R"({"results":[],"config":{}})"), std::string(R"({"results":[],"config":[3]})"),
        std::string(R"({"results":[],"config":[{"opaque":[]}]})"), std::string("[]"), std::string("5")}) {
    auto c = DecodeResourceClaim(with_devices(devices));
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << devices;
    EXPECT_NE(c.status().message().find("ResourceClaim n/c has an unexpected shape"), std::string::npos)
        << c.status().message();
  }
  EXPECT_FALSE(DecodeResourceClaim(R"({"kind":"ResourceClaim","status":{"allocation":7}})").ok());
  EXPECT_FALSE(DecodeResourceClaim(R"({"kind":"ResourceClaim","status":{"reservedFor":[1]}})").ok());
  EXPECT_FALSE(DecodeResourceClaim(R"({"kind":"ResourceClaim","metadata":[]})").ok());
  // Null and empty lists are what the API server sends for "none".
  auto none = DecodeResourceClaim(with_devices(R"({"results":null,"config":[]})"));
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->allocated);
  EXPECT_TRUE(none->results.empty());
}

TEST(ResourceClaimTest, DeepNestingIsAnErrorNotACrash) {
  const size_t depth = 70'000;
  for (const std::string& where : {std::string("metadata"), std::string("params")}) {
    std::string deep = std::string(depth, '[') + std::string(depth, ']');
    std::string text =
        where == "metadata"
            ? R"({"kind":"ResourceClaim","metadata":{"name":"c","managedFields":)" + deep + "}}"
            : R"({"kind":"ResourceClaim","metadata":{"name":"c"},"status":{"allocation":{"devices":{"results":[],)"
              R"("config":[{"source":"FromClaim","opaque":{"driver":"d","parameters":{"a":)" +
                  deep + "}}}]}}}}";
    auto c = DecodeResourceClaim(text);
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << where;
    EXPECT_NE(c.status().message().find("deeper than"), std::string::npos) << c.status().message();
  }
}

TEST(ResourceClaimTest, ConsumedCapacityOfAShare) {
  std::string text =
      R"({"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"name":"c","namespace":"n","uid":"u"},
    "status":{"allocation":{"devices":{"results":[
      {"request":"gpu","driver":"gpu.nvidia.com","pool":"node-1","device":"gpu-0",
       "shareID":"7a3c1e52-9d1b-4c8e-a0f3-2b6d5e4f1a90","consumedCapacity":{"memory":"4Gi","shares":"1"}},
      {"request":"other","driver":"gpu.nvidia.com","pool":"node-1","device":"gpu-1"}]}}}})";
  auto c = DecodeResourceClaim(text);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->results.size(), 2u);
  EXPECT_EQ(c->results[0].share_id, "7a3c1e52-9d1b-4c8e-a0f3-2b6d5e4f1a90");
  EXPECT_EQ(c->results[0].consumed_capacity, (std::map<std::string, std::string>{{"memory", "4Gi"}, {"shares", "1"}}));
  EXPECT_TRUE(c->results[1].consumed_capacity.empty());

  std::string bad = text;
  bad.replace(bad.find(R"("shares":"1")"), 12, R"("shares":1)");
  auto b = DecodeResourceClaim(bad);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(
      b.status().message().find("status.allocation.devices.results[0].consumedCapacity.shares: expected a string"),
      std::string::npos)
      << b.status().message();
}

}  // namespace
}  // namespace nvdra::kube
