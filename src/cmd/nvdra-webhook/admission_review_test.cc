// The webhook's decisions on AdmissionReview bodies: upstream's user specs
// (every claim and template in them admitted), invalid variants refused with
// upstream's messages, and hostile bodies refused with a clear answer.
#include "admission/admission_review.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "admission/webhook_routes.h"
#include "cmd/config_kinds/config_kinds.h"
#include "kube/yaml_json.h"
#include "util/test_paths.h"

namespace nvdra::admission {
namespace {

// nvdra's config kinds, registered as nvdra-webhook registers them at start.
[[maybe_unused]] const bool kReviewTestKinds = RegisterNvdraConfigKinds().ok();

namespace fs = std::filesystem;
using config::FeatureGates;
using config::Gate;
using nlohmann::json;

const fs::path kSpecs = fs::path(NVDRA_SHARED_DIR) / "fixtures" / "upstream-user-specs";

FeatureGates SharingGates() {
  return FeatureGates().With(Gate::kTimeSlicingSettings, true).With(Gate::kMPSSupport, true);
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The AdmissionReview the API server sends for creating `object` through
// resource.k8s.io/<version>/<resource>.
std::string ReviewBody(const json& object, const std::string& version, const std::string& resource,
                       const std::string& uid = "705ab4f5-6393-11e8-b7cc-42010a800002") {
  json review = {{"apiVersion", "admission.k8s.io/v1"},
                 {"kind", "AdmissionReview"},
                 {"request",
                  {{"uid", uid},
                   {"kind", {{"group", "resource.k8s.io"}, {"version", version}, {"kind", object.value("kind", "")}}},
                   {"resource", {{"group", "resource.k8s.io"}, {"version", version}, {"resource", resource}}},
                   {"namespace", "default"},
                   {"operation", "CREATE"},
                   {"userInfo", {{"username", "admin"}}},
                   {"object", object},
                   {"oldObject", nullptr},
                   {"dryRun", false}}}};
  return review.dump();
}

std::string ResourceOf(const json& object) {
  return object.at("kind") == "ResourceClaimTemplate" ? "resourceclaimtemplates" : "resourceclaims";
}

// Every ResourceClaim and ResourceClaimTemplate of a manifest, as JSON.
std::vector<json> ClaimObjects(const std::string& yaml_text) {
  std::vector<json> out;
  for (const YAML::Node& doc : YAML::LoadAll(yaml_text)) {
    if (!doc.IsMap()) continue;
    json j = kube::YamlNodeToJson(doc);
    std::string kind = j.value("kind", "");
    if (kind == "ResourceClaim" || kind == "ResourceClaimTemplate") out.push_back(j);
  }
  return out;
}

struct Decision {
  int http_status = 0;
  json review;  // the answer's body, when it is JSON
  std::string body;
  bool allowed() const { return review.at("response").at("allowed").get<bool>(); }
  std::string message() const { return review.at("response").at("status").at("message").get<std::string>(); }
  std::string reason() const { return review.at("response").at("status").at("reason").get<std::string>(); }
};

Decision Decide(const std::string& body, const FeatureGates& gates = SharingGates(),
                const std::string& content_type = "application/json", WebhookScope scope = WebhookScope::kNvdra) {
  HttpAnswer a = ReviewResourceClaimParameters(content_type, body, gates, scope);
  Decision d;
  d.http_status = a.status;
  d.body = a.body;
  if (a.content_type == "application/json") d.review = json::parse(a.body);
  return d;
}

Decision DecideObject(const json& object, const FeatureGates& gates = SharingGates(),
                      WebhookScope scope = WebhookScope::kNvdra) {
  std::string version = object.at("apiVersion").get<std::string>().substr(std::string("resource.k8s.io/").size());
  return Decide(ReviewBody(object, version, ResourceOf(object)), gates, "application/json", scope);
}

Decision DecideUpstream(const json& object) { return DecideObject(object, SharingGates(), WebhookScope::kUpstream); }

// `object` as if sent through another version of resource.k8s.io.
json AsVersion(json object, const std::string& version) {
  object["apiVersion"] = "resource.k8s.io/" + version;
  return object;
}

// The opaque parameters of config `i` of a claim or template.
json& Params(json& object, size_t i) {
  json& spec = object.at("kind") == "ResourceClaimTemplate" ? object["spec"]["spec"] : object["spec"];
  return spec["devices"]["config"][i]["opaque"]["parameters"];
}

json ObjectFrom(const std::string& file, const std::string& name) {
  for (json& o : ClaimObjects(ReadFile(kSpecs / file))) {
    if (o["metadata"]["name"] == name) return o;
  }
  ADD_FAILURE() << "no claim or template " << name << " in " << file;
  return json::object();
}

// The channel claim of upstream's bad-opaque-config test, for `version`.
json UnknownFieldClaim(const std::string& version) {
  std::string text = ReadFile(kSpecs / "rc-opaque-cfg-unknown-field.yaml.tmpl");
  auto replace = [&](const std::string& from, const std::string& to) {
    for (size_t p; (p = text.find(from)) != std::string::npos;) text.replace(p, from.size(), to);
  };
  replace("${TEST_K8S_RESOURCE_API_VERSION}", version);
  replace("${TEST_DEVCLASSNAME_CD_CHANNEL}",
          version == "v1" ? "exactly:\n        deviceClassName: compute-domain-default-channel.nvidia.com"
                          : "deviceClassName: compute-domain-default-channel.nvidia.com");
  auto objects = ClaimObjects(text);
  EXPECT_EQ(objects.size(), 1u);
  return objects.empty() ? json::object() : objects[0];
}

TEST(AdmissionReviewTest, EveryClaimAndTemplateOfTheUpstreamUserSpecsIsAdmittedInEveryVersion) {
  size_t objects = 0, with_configs = 0;
  for (const auto& entry : fs::directory_iterator(kSpecs)) {
    if (entry.path().extension() != ".yaml") continue;
    for (const json& object : ClaimObjects(ReadFile(entry.path()))) {
      ++objects;
      if (object.dump().find("\"opaque\"") != std::string::npos) ++with_configs;
      for (const std::string version : {"v1", "v1beta2", "v1beta1"}) {
        Decision d = DecideObject(AsVersion(object, version));
        ASSERT_EQ(d.http_status, 200) << entry.path() << ": " << d.body;
        EXPECT_TRUE(d.allowed()) << entry.path() << " " << version << ": " << d.body;
        EXPECT_EQ(d.review["apiVersion"], "admission.k8s.io/v1");
        EXPECT_EQ(d.review["kind"], "AdmissionReview");
        EXPECT_EQ(d.review["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
        EXPECT_FALSE(d.review["response"].contains("status"));
      }
    }
  }
  // The specs hold claims and templates, some with GpuConfigs, MPS and
  // VFIO configs: a fixture directory that lost them would pass vacuously.
  EXPECT_GE(objects, 10u);
  EXPECT_GE(with_configs, 4u);
}

TEST(AdmissionReviewTest, TwoInvalidConfigsOfAnUpstreamTemplateAreRefusedWithUpstreamsMessage) {
  json t = ObjectFrom("gpu-test5.yaml", "multiple-gpus");
  Params(t, 0)["sharing"]["timeSlicingConfig"]["interval"] = "Invalid Interval";
  Params(t, 1)["sharing"]["mpsConfig"]["defaultActiveThreadPercentage"] = -1;
  Decision d = DecideObject(t);
  ASSERT_EQ(d.http_status, 200);
  EXPECT_FALSE(d.allowed());
  EXPECT_EQ(d.reason(), "Invalid");
  EXPECT_EQ(d.message(),
            "2 configs failed to validate: object at spec.spec.devices.config[0].opaque.parameters is invalid: "
            "unknown time-slice interval: Invalid Interval, supported time-slice intervals: Default, Short, Medium, "
            "Long; object at spec.spec.devices.config[1].opaque.parameters is invalid: active thread percentage "
            "must not be negative");
}

TEST(AdmissionReviewTest, AnInvalidConfigOfAClaimIsRefusedInEveryVersionWithTheClaimsPath) {
  json c = ObjectFrom("gpu-test5.yaml", "multiple-gpus");
  // The template's inner spec as a claim.
  json claim = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceClaim"},
                {"metadata", {{"name", "c"}, {"namespace", "gpu-test5"}}},
                {"spec", c["spec"]["spec"]}};
  Params(claim, 1)["sharing"]["mpsConfig"]["defaultActiveThreadPercentage"] = -1;
  for (const std::string version : {"v1", "v1beta2", "v1beta1"}) {
    Decision d = DecideObject(AsVersion(claim, version));
    ASSERT_EQ(d.http_status, 200);
    EXPECT_FALSE(d.allowed());
    EXPECT_EQ(d.message(), "1 configs failed to validate: object at spec.devices.config[1].opaque.parameters is "
                           "invalid: active thread percentage must not be negative")
        << version;
  }
}

TEST(AdmissionReviewTest, ASharingStrategyWhoseGateIsOffIsRefusedAsThePluginsRefuseIt) {
  json t = ObjectFrom("gpu-test6.yaml", "a100");
  Decision off = DecideObject(t, FeatureGates());
  EXPECT_FALSE(off.allowed());
  EXPECT_EQ(off.message(), "1 configs failed to validate: object at spec.spec.devices.config[0].opaque.parameters "
                           "is invalid: \"TimeSlicing\" is selected as the GPU sharing strategy, but the "
                           "\"TimeSlicingSettings\" feature gate is not enabled");
  EXPECT_TRUE(DecideObject(t, FeatureGates().With(Gate::kTimeSlicingSettings, true)).allowed());

  json mps = ObjectFrom("gpu-test-mps.yaml", "shared-gpu");
  Decision mps_off = DecideObject(mps, FeatureGates().With(Gate::kTimeSlicingSettings, true));
  EXPECT_FALSE(mps_off.allowed());
  EXPECT_NE(mps_off.message().find("but the \"MPSSupport\" feature gate is not enabled"), std::string::npos)
      << mps_off.message();
}

TEST(AdmissionReviewTest, UpstreamsUnknownFieldChannelClaimIsRefusedInEveryVersion) {
  for (const std::string version : {"v1", "v1beta2", "v1beta1"}) {
    Decision d = DecideObject(UnknownFieldClaim(version));
    ASSERT_EQ(d.http_status, 200) << d.body;
    EXPECT_FALSE(d.allowed()) << version;
    EXPECT_EQ(d.reason(), "Invalid");
    EXPECT_EQ(d.message(), "1 configs failed to validate: error decoding object at "
                           "spec.devices.config[0].opaque.parameters: strict decoding error: unknown field "
                           "\"unexpectedField\"")
        << version;
  }
  // Without the unknown field the same claim is admitted.
  json good = UnknownFieldClaim("v1");
  Params(good, 0).erase("unexpectedField");
  EXPECT_TRUE(DecideObject(good).allowed());
}

TEST(AdmissionReviewTest, TheScopeFlagsWordsAreNvdraAndUpstream) {
  EXPECT_EQ(ParseWebhookScope("nvdra"), WebhookScope::kNvdra);
  EXPECT_EQ(ParseWebhookScope("upstream"), WebhookScope::kUpstream);
  EXPECT_EQ(ParseWebhookScope("Upstream"), std::nullopt);
  EXPECT_EQ(ParseWebhookScope(""), std::nullopt);
}

TEST(AdmissionReviewTest, UpstreamScopeAdmitsTheUnknownFieldChannelClaimAsUpstreamsWebhookDoes) {
  for (const std::string version : {"v1", "v1beta2", "v1beta1"}) {
    json claim = UnknownFieldClaim(version);
    EXPECT_FALSE(DecideObject(claim).allowed()) << version;
    Decision d = DecideUpstream(claim);
    ASSERT_EQ(d.http_status, 200) << d.body;
    EXPECT_TRUE(d.allowed()) << version << ": " << d.body;
  }
}

TEST(AdmissionReviewTest, UpstreamScopeLeavesPinnedLimitsAndStrategyMixesToPrepare) {
  json mps = ObjectFrom("gpu-test-mps.yaml", "shared-gpu");
  Params(mps, 0)["sharing"]["mpsConfig"]["defaultPinnedDeviceMemoryLimit"] = "1Ki";
  Decision strict = DecideObject(mps);
  EXPECT_FALSE(strict.allowed());
  EXPECT_NE(strict.message().find("invalid limit: default value set too low: 1Ki"), std::string::npos)
      << strict.message();
  EXPECT_TRUE(DecideUpstream(mps).allowed());
  Params(mps, 0)["sharing"]["mpsConfig"].erase("defaultPinnedDeviceMemoryLimit");
  Params(mps, 0)["sharing"]["mpsConfig"]["defaultPerDevicePinnedMemoryLimit"] = {{"0", "0"}};
  EXPECT_FALSE(DecideObject(mps).allowed());
  EXPECT_TRUE(DecideUpstream(mps).allowed());
  Params(mps, 0)["sharing"]["timeSlicingConfig"] = {{"interval", "Long"}};
  EXPECT_FALSE(DecideObject(mps).allowed());
  EXPECT_TRUE(DecideUpstream(mps).allowed());

  json ts = ObjectFrom("gpu-test6.yaml", "a100");
  Params(ts, 0)["sharing"]["mpsConfig"] = {{"defaultActiveThreadPercentage", 50}};
  Decision mixed = DecideObject(ts);
  EXPECT_FALSE(mixed.allowed());
  EXPECT_NE(mixed.message().find("cannot use MpsConfig with the 'TimeSlicing' strategy"), std::string::npos)
      << mixed.message();
  EXPECT_TRUE(DecideUpstream(ts).allowed());
}

TEST(AdmissionReviewTest, UpstreamScopeStillRefusesWhatUpstreamsWebhookRefuses) {
  json mps = ObjectFrom("gpu-test-mps.yaml", "shared-gpu");
  Params(mps, 0)["sharing"]["mpsConfig"]["defaultActiveThreadPercentage"] = 101;
  Decision pct = DecideUpstream(mps);
  EXPECT_FALSE(pct.allowed());
  EXPECT_NE(pct.message().find("active thread percentage must not be greater than 100"), std::string::npos)
      << pct.message();
  json ts = ObjectFrom("gpu-test6.yaml", "a100");
  Params(ts, 0)["sharing"]["timeSlicingConfig"]["interval"] = "Forever";
  EXPECT_FALSE(DecideUpstream(ts).allowed());
  json unknown = ObjectFrom("gpu-test6.yaml", "a100");
  Params(unknown, 0)["unexpectedField"] = 1;
  Decision u = DecideUpstream(unknown);
  EXPECT_FALSE(u.allowed());
  EXPECT_NE(u.message().find("strict decoding error: unknown field \"unexpectedField\""), std::string::npos)
      << u.message();
  // gpu.nvidia.com's configs are judged whatever their kind, as upstream's.
  json channel = UnknownFieldClaim("v1");
  channel["spec"]["devices"]["config"][0]["opaque"]["driver"] = "gpu.nvidia.com";
  EXPECT_FALSE(DecideUpstream(channel).allowed());
}

TEST(AdmissionReviewTest, StrictDecodingRefusesDuplicateFieldsUnknownKindsAndBadValues) {
  json t = ObjectFrom("gpu-test-vfio-config.yaml", "single-gpu-full-vfioconfig");
  EXPECT_TRUE(DecideObject(t).allowed());
  Params(t, 0)["iommu"]["backendPolicy"] = "Sometimes";
  Decision bad_policy = DecideObject(t);
  EXPECT_FALSE(bad_policy.allowed());
  EXPECT_NE(bad_policy.message().find("is invalid: unknown IOMMU backend policy: Sometimes"), std::string::npos)
      << bad_policy.message();

  json c = ObjectFrom("gpu-test6.yaml", "a100");
  Params(c, 0)["kind"] = "GpuConfigs";
  Decision unknown_kind = DecideObject(c);
  EXPECT_FALSE(unknown_kind.allowed());
  EXPECT_NE(unknown_kind.message().find("error decoding object at spec.spec.devices.config[0].opaque.parameters: "
                                        "no kind \"GpuConfigs\" is registered"),
            std::string::npos)
      << unknown_kind.message();

  // A duplicate key survives only in the raw bytes: the decoder sees them.
  json ok = ObjectFrom("gpu-test6.yaml", "a100");
  std::string body = ReviewBody(ok, "v1", "resourceclaimtemplates");
  const std::string kind = "\"kind\":\"GpuConfig\"";
  size_t at = body.find(kind);
  ASSERT_NE(at, std::string::npos);
  body.insert(at, kind + ",");
  Decision dup = Decide(body);
  EXPECT_FALSE(dup.allowed());
  EXPECT_NE(dup.message().find("strict decoding error: duplicate field \"kind\""), std::string::npos) << dup.message();
}

TEST(AdmissionReviewTest, OtherDriversConfigsAndNonOpaqueConfigsAreLeftAlone) {
  json claim = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceClaim"},
                {"metadata", {{"name", "c"}}},
                {"spec",
                 {{"devices",
                   {{"requests", {{{"name", "r"}, {"exactly", {{"deviceClassName", "example.com"}}}}}},
                    {"config",
                     {{{"opaque", {{"driver", "example.com"}, {"parameters", {{"anything", "goes"}}}}}},
                      {{"requests", {"r"}}}}}}}}}};
  EXPECT_TRUE(DecideObject(claim).allowed());
  claim["spec"]["devices"]["config"][0]["opaque"]["driver"] = "gpu.nvidia.com";
  Decision d = DecideObject(claim);
  EXPECT_FALSE(d.allowed());
  EXPECT_EQ(d.message().rfind("1 configs failed to validate: error decoding object at "
                              "spec.devices.config[0].opaque.parameters: ",
                              0),
            0u)
      << d.message();
}

TEST(AdmissionReviewTest, AConfigWithoutParametersIsRefusedNotCrashedOn) {
  json claim = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceClaim"},
                {"spec", {{"devices", {{"config", {{{"opaque", {{"driver", "gpu.nvidia.com"}}}}}}}}}}};
  Decision d = DecideObject(claim);
  ASSERT_EQ(d.http_status, 200);
  EXPECT_FALSE(d.allowed());
  EXPECT_EQ(d.reason(), "Invalid");
}

// The API server allows 32 configs per claim: each of 32 is judged.
TEST(AdmissionReviewTest, ThirtyTwoConfigsAreEachJudged) {
  json t = ObjectFrom("gpu-test6.yaml", "a100");
  json one = t["spec"]["spec"]["devices"]["config"][0];
  json& configs = t["spec"]["spec"]["devices"]["config"];
  configs = json::array();
  for (size_t i = 0; i < kMaxConfigsPerClaim; ++i) configs.push_back(one);
  configs[31]["opaque"]["parameters"]["sharing"]["timeSlicingConfig"]["interval"] = "Forever";
  Decision d = DecideObject(t);
  EXPECT_FALSE(d.allowed());
  EXPECT_EQ(d.message().rfind("1 configs failed to validate: object at spec.spec.devices.config[31].", 0), 0u)
      << d.message().substr(0, 200);
}

// More than the API server allows comes from someone else than the API
// server: refused with its words, before any config is decoded (the one
// config that does not decode is not what the answer names).
TEST(AdmissionReviewTest, MoreConfigsThanTheApiServerAllowsAreRefusedUnjudged) {
  json t = ObjectFrom("gpu-test6.yaml", "a100");
  json one = t["spec"]["spec"]["devices"]["config"][0];
  for (size_t n : {size_t{33}, size_t{4000}}) {
    json& configs = t["spec"]["spec"]["devices"]["config"];
    configs = json::array();
    for (size_t i = 0; i < n; ++i) configs.push_back(one);
    configs[0]["opaque"]["parameters"]["sharing"]["timeSlicingConfig"]["interval"] = "Forever";
    Decision d = DecideObject(t);
    ASSERT_EQ(d.http_status, 200);
    EXPECT_FALSE(d.allowed());
    EXPECT_EQ(d.reason(), "Invalid");
    EXPECT_EQ(d.message(), "spec.spec.devices.config: Too many: " + std::to_string(n) + ": must have at most 32 items");
  }
  json claim = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceClaim"},
                {"spec", {{"devices", {{"config", json::array()}}}}}};
  for (int i = 0; i < 100; ++i) claim["spec"]["devices"]["config"].push_back({{"opaque", {{"driver", "example.com"}}}});
  EXPECT_EQ(DecideObject(claim).message(), "spec.devices.config: Too many: 100: must have at most 32 items");
}

// Parsed, a few MiB of tiny values would take seconds and hundreds of MiB:
// a body of more than 200,000 values is refused before it is parsed, even
// when it is a well-formed review (the API server sends a few thousand).
TEST(AdmissionReviewTest, ABodyOfTooManyValuesIsRefusedUnparsed) {
  json claim = ObjectFrom("gpu-test6.yaml", "a100");
  claim["metadata"]["pad"] = json::array();
  for (int i = 0; i < 100'000; ++i) claim["metadata"]["pad"].push_back(json::object());
  EXPECT_TRUE(DecideObject(claim).allowed());
  for (int i = 0; i < 100'000; ++i) claim["metadata"]["pad"].push_back(0);
  Decision d = DecideObject(claim);
  EXPECT_EQ(d.http_status, 400);
  EXPECT_EQ(d.body,
            "failed to read AdmissionReview from request body: request could not be decoded: the request body holds "
            "more than 200000 JSON values; refusing to decode it\n");
  // Commas, brackets and braces inside strings are no values.
  claim["metadata"]["pad"] = std::string(500'000, ',') + std::string(500'000, '{');
  EXPECT_TRUE(DecideObject(claim).allowed());
}

TEST(AdmissionReviewTest, AWrongContentTypeIs415WithUpstreamsMessage) {
  Decision d = Decide("{}", SharingGates(), "text/plain");
  EXPECT_EQ(d.http_status, 415);
  EXPECT_EQ(d.body, "contentType=text/plain, expected application/json\n");
  EXPECT_EQ(Decide("{}", SharingGates(), "").body, "contentType=, expected application/json\n");
}

TEST(AdmissionReviewTest, BodiesThatAreNoAdmissionReviewV1Are400) {
  const std::pair<std::string, std::string> cases[] = {
      {"", "request could not be decoded"},
      {"not json", "request could not be decoded"},
      {"[1,2,3]", "request could not be decoded: expected a JSON object, got an array"},
      {"{\"metadata\":{\"creationTimestamp\":null}}", "Object 'Kind' is missing in"},
      {"{\"kind\":\"AdmissionReview\"}", "Object 'apiVersion' is missing in"},
      {"{\"apiVersion\":\"admission.k8s.io/v1beta1\",\"kind\":\"AdmissionReview\",\"request\":{}}",
       "unsupported group version kind: admission.k8s.io/v1beta1, Kind=AdmissionReview"},
      {"{\"apiVersion\":\"v1\",\"kind\":\"Pod\"}", "unsupported group version kind: v1, Kind=Pod"},
      {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}", "has no request"},
      {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":\"x\"}",
       "request: expected an object"},
      {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":7}}",
       "request.uid: expected a string"},
      {std::string(100000, '[') + std::string(100000, ']'), "deeper than"},
      {"{\"a\":" + std::string(5000, '{') + std::string(5000, '}') + "}", "deeper than"},
  };
  for (const auto& [body, want] : cases) {
    Decision d = Decide(body);
    EXPECT_EQ(d.http_status, 400) << body.substr(0, 80);
    EXPECT_EQ(d.body.rfind("failed to read AdmissionReview from request body: ", 0), 0u) << d.body.substr(0, 200);
    EXPECT_NE(d.body.find(want), std::string::npos) << d.body.substr(0, 300);
    // A message quotes a body only in part.
    EXPECT_LT(d.body.size(), 1024u);
  }
}

TEST(AdmissionReviewTest, OtherResourcesAndMismatchedObjectsAreRefusedAsBadRequests) {
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", "p"}}}};
  json review = json::parse(ReviewBody(pod, "v1", "pods"));
  review["request"]["resource"]["group"] = "";
  Decision d = Decide(review.dump());
  ASSERT_EQ(d.http_status, 200);
  EXPECT_FALSE(d.allowed());
  EXPECT_EQ(d.reason(), "BadRequest");
  EXPECT_EQ(d.message(), "expected resource to be one of the supported versions for resourceclaims or "
                         "resourceclaimtemplates, got { v1 pods}");

  Decision alpha = Decide(ReviewBody(ObjectFrom("gpu-test6.yaml", "a100"), "v1alpha3", "resourceclaimtemplates"));
  EXPECT_FALSE(alpha.allowed());
  EXPECT_EQ(alpha.message(), "expected resource to be one of the supported versions for resourceclaims or "
                             "resourceclaimtemplates, got {resource.k8s.io v1alpha3 resourceclaimtemplates}");

  // A template sent as a claim, and a v1 object under v1beta1.
  json t = ObjectFrom("gpu-test6.yaml", "a100");
  Decision as_claim = Decide(ReviewBody(t, "v1", "resourceclaims"));
  EXPECT_FALSE(as_claim.allowed());
  EXPECT_EQ(as_claim.reason(), "BadRequest");
  EXPECT_NE(as_claim.message().find("not the resource.k8s.io/v1 ResourceClaim"), std::string::npos)
      << as_claim.message();
  Decision skew = Decide(ReviewBody(t, "v1beta1", "resourceclaimtemplates"));
  EXPECT_FALSE(skew.allowed());
  EXPECT_EQ(skew.reason(), "BadRequest");

  json no_object = json::parse(ReviewBody(t, "v1", "resourceclaimtemplates"));
  no_object["request"]["object"] = nullptr;
  Decision none = Decide(no_object.dump());
  EXPECT_FALSE(none.allowed());
  EXPECT_EQ(none.message(), "the request carries no ResourceClaimTemplate");
}

TEST(AdmissionReviewTest, ObjectsOfTheWrongShapeAreRefusedWithThePathThatIsWrong) {
  json t = ObjectFrom("gpu-test6.yaml", "a100");
  json bad = t;
  bad["spec"]["spec"]["devices"]["config"] = "all of them";
  Decision d = DecideObject(bad);
  EXPECT_FALSE(d.allowed());
  EXPECT_EQ(d.reason(), "BadRequest");
  EXPECT_NE(d.message().find("request.object.spec.spec.devices.config: expected an array"), std::string::npos)
      << d.message();

  bad = t;
  bad["spec"]["spec"]["devices"]["config"][0]["opaque"]["driver"] = 42;
  d = DecideObject(bad);
  EXPECT_FALSE(d.allowed());
  EXPECT_NE(d.message().find("config[0].opaque.driver: expected a string, got a number"), std::string::npos)
      << d.message();

  bad = t;
  bad["spec"] = json::array();
  d = DecideObject(bad);
  EXPECT_FALSE(d.allowed());
  EXPECT_NE(d.message().find("request.object.spec: expected an object"), std::string::npos) << d.message();
}

TEST(AdmissionReviewTest, RoutesAreUpstreamsPaths) {
  FeatureGates gates = SharingGates();
  HttpAnswer ready = ServeWebhook({"GET", "/readyz", "", ""}, gates);
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(ready.body, "ok");
  HttpAnswer missing = ServeWebhook({"GET", "/validate", "", ""}, gates);
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.body, "404 page not found\n");
  std::string body = ReviewBody(ObjectFrom("gpu-test6.yaml", "a100"), "v1", "resourceclaimtemplates", "u-1");
  HttpAnswer review = ServeWebhook({"POST", "/validate-resource-claim-parameters?timeout=10s", "application/json",
                                    body},
                                   gates);
  ASSERT_EQ(review.status, 200);
  EXPECT_EQ(json::parse(review.body)["response"], json({{"uid", "u-1"}, {"allowed", true}}));
}

}  // namespace
}  // namespace nvdra::admission
