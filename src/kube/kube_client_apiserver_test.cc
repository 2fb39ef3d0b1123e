// KubeClient over real HTTP(S) against the test API server.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "kube/kube_client.h"
#include "test_apiserver.h"
#include "util/file_util.h"
#include "util/test_paths.h"

namespace nvdra::kube {
namespace {

using nlohmann::json;
using nvdra::testing::TestApiServer;
using nvdra::testing::TestApiServerOptions;

const std::string kFixtures = std::string(NVDRA_SHARED_DIR) + "/fixtures/kubernetes-api";

KubeClientOptions Fast() {
  KubeClientOptions o;
  o.qps = 0;  // tests are not the API server's problem
  o.initial_backoff = std::chrono::milliseconds(1);
  o.max_retry_after = std::chrono::seconds(0);
  o.request_timeout = std::chrono::milliseconds(5000);
  return o;
}

json Claim(const std::string& ns, const std::string& name, bool allocated) {
  json c = {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "ResourceClaim"},
            {"metadata", {{"name", name}, {"namespace", ns}}},
            {"spec", json::object()}};
  if (allocated) {
    c["status"] = {
        {"allocation",
         {{"devices",
           {{"results",
             json::array({{{"request", "gpu"}, {"driver", "gpu.nvidia.com"}, {"pool", "node1"}, {"device", "gpu-0"}}})},
            {"config",
             json::array({{{"source", "FromClaim"},
                           {"opaque", {{"driver", "gpu.nvidia.com"}, {"parameters", {{"kind", "GpuConfig"}}}}}}})}}}}}};
  }
  return c;
}

TEST(KubeClientApiServerTest, EveryFixtureLoadsAndReadsBack) {
  TestApiServer server;
  ASSERT_TRUE(server.ok()) << server.error();
  auto client = KubeClient::FromConfig(server.Config(), Fast());
  size_t seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kFixtures)) {
    std::string file = entry.path().filename().string();
    auto text = ReadFileToString(entry.path().string());
    ASSERT_TRUE(text.ok());
    json fixture = json::parse(*text);
    std::string kind = fixture["kind"];
    if (kind == "ResourceClaim") {
      auto c = DecodeResourceClaim(*text);
      ASSERT_TRUE(c.ok()) << file << ": " << c.status().ToString();
      EXPECT_EQ(c->results.size(), 1u) << file;
    }
    if (kind != "ResourceClaim" && kind != "ResourceSlice" && kind != "Node") continue;
    ++seen;
    ASSERT_TRUE(server.Control("objects", {}).ok());
    std::string version = fixture["apiVersion"].get<std::string>();
    std::string gv = version == "v1" ? "/api/v1" : "/apis/" + version;
    // Load under a unique name, then read it back through the same version.
    fixture["metadata"]["name"] = "fx-" + std::to_string(seen);
    ASSERT_TRUE(server.LoadObject(fixture).ok()) << file;
    std::string path = kind == "ResourceClaim"
                           ? gv + "/namespaces/" + fixture["metadata"]["namespace"].get<std::string>() +
                                 "/resourceclaims/"
                           : gv + (kind == "Node" ? "/nodes/" : "/resourceslices/");
    auto got = client->GetJson(path + fixture["metadata"]["name"].get<std::string>());
    ASSERT_TRUE(got.ok()) << file << ": " << got.status().ToString();
    EXPECT_EQ((*got)["spec"], fixture["spec"]) << file;
    if (kind == "ResourceClaim") {
      auto c = DecodeResourceClaim(got->dump());
      ASSERT_TRUE(c.ok());
      EXPECT_EQ(c->uid, fixture["metadata"]["uid"]) << file;
      EXPECT_TRUE(c->allocated);
    }
  }
  EXPECT_EQ(seen, 7u);
}

TEST(KubeClientApiServerTest, GetResourceClaimTellsTheOutcomesApart) {
  TestApiServer server;
  ASSERT_TRUE(server.ok()) << server.error();
  ASSERT_TRUE(server.LoadObject(Claim("ns", "ok", true)).ok());
  ASSERT_TRUE(server.LoadObject(Claim("ns", "pending", false)).ok());
  auto client = KubeClient::FromConfig(server.Config(), Fast());
  auto ok = client->GetResourceClaim("ns", "ok");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->api_version, "resource.k8s.io/v1");
  EXPECT_TRUE(ok->allocated);
  EXPECT_EQ(ok->configs.at(0).opaque->parameters, R"({"kind": "GpuConfig"})");

  EXPECT_EQ(client->GetResourceClaim("ns", "missing").status().code(), StatusCode::kNotFound);
  auto pending = client->GetResourceClaim("ns", "pending");
  ASSERT_TRUE(pending.ok()) << pending.status().ToString();
  EXPECT_FALSE(pending->allocated);

  auto new_uid = server.Replace("resourceclaims", "ns", "ok");
  ASSERT_TRUE(new_uid.ok());
  auto replaced = client->GetResourceClaim("ns", "ok");
  ASSERT_TRUE(replaced.ok());
  EXPECT_NE(replaced->uid, ok->uid);
  EXPECT_EQ(replaced->uid, *new_uid);

  ASSERT_TRUE(server.InjectFault({{"drop", true}, {"count", -1}}).ok());
  KubeClientOptions o = Fast();
  o.max_attempts = 2;
  auto down = KubeClient::FromConfig(server.Config(), o)->GetResourceClaim("ns", "ok");
  EXPECT_EQ(down.status().code(), StatusCode::kUnavailable) << down.status().ToString();
}

TEST(KubeClientApiServerTest, FallsBackToOlderVersionsAndRediscovers) {
  TestApiServerOptions opts;
  opts.versions = "v1beta1";
  TestApiServer server(opts);
  ASSERT_TRUE(server.ok()) << server.error();
  ASSERT_TRUE(server.LoadObject(Claim("ns", "c", true)).ok());
  auto client = KubeClient::FromConfig(server.Config(), Fast());
  auto c = client->GetResourceClaim("ns", "c");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->api_version, "resource.k8s.io/v1beta1");
  EXPECT_EQ(*client->ResourceApiVersion(), "v1beta1");

  // The server is upgraded: v1beta1 goes away, v1beta2 appears. The
  // "404 page not found" for the group version triggers one rediscovery.
  ASSERT_TRUE(server.SetVersions({"v1beta2"}).ok());
  c = client->GetResourceClaim("ns", "c");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->api_version, "resource.k8s.io/v1beta2");

  ASSERT_TRUE(server.SetVersions({}).ok());
  client->ForgetResourceApiVersion();
  EXPECT_EQ(client->GetResourceClaim("ns", "c").status().code(), StatusCode::kFailedPrecondition);
}

TEST(KubeClientApiServerTest, RetriesInjected429And500) {
  TestApiServer server;
  ASSERT_TRUE(server.ok()) << server.error();
  ASSERT_TRUE(server.LoadFile(kFixtures + "/core.v1.Node.json").ok());
  ASSERT_TRUE(server.InjectFault({{"status", 429}, {"retry_after", 1}, {"count", 1}}).ok());
  ASSERT_TRUE(server.InjectFault({{"status", 500}, {"count", 1}}).ok());
  std::vector<std::chrono::nanoseconds> sleeps;
  KubeClientOptions o = Fast();
  o.max_retry_after = std::chrono::seconds(60);
  o.sleep = [&](std::chrono::nanoseconds d) { sleeps.push_back(d); };
  auto client = KubeClient::FromConfig(server.Config(), o);
  auto node = client->GetNode("nameValue");
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ((*node)["metadata"]["uid"], "uidValue");
  EXPECT_EQ(client->stats().retries, 2u);
  ASSERT_EQ(sleeps.size(), 2u);
  EXPECT_EQ(sleeps[0], std::chrono::seconds(1));  // Retry-After honoured
}

TEST(KubeClientApiServerTest, TimeoutOnSlowServer) {
  TestApiServer server;
  ASSERT_TRUE(server.ok()) << server.error();
  ASSERT_TRUE(server.InjectFault({{"latency_ms", 1500}, {"count", 1}}).ok());
  KubeClientOptions o = Fast();
  o.request_timeout = std::chrono::milliseconds(300);
  o.max_attempts = 1;
  auto r = KubeClient::FromConfig(server.Config(), o)->GetJson("/api/v1/nodes/x");
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
}

// A slow API server once kept one prepare retrying for 54 s against a 5 s
// deadline: every attempt waited out the full request timeout.
TEST(KubeClientApiServerTest, SlowServerStopsAtTheClaimDeadline) {
  TestApiServer server;
  ASSERT_TRUE(server.ok()) << server.error();
  ASSERT_TRUE(server.LoadObject(Claim("ns", "c", true)).ok());
  KubeClientOptions o = Fast();
  o.initial_backoff = std::chrono::milliseconds(250);
  auto client = KubeClient::FromConfig(server.Config(), o);
  ASSERT_TRUE(client->ResourceApiVersion().ok());
  ASSERT_TRUE(server.Requests(/*clear=*/true).ok());
  ASSERT_TRUE(server
                  .InjectFault({{"status", 500},
                                {"latency_ms", 1000},
                                {"count", -1},
                                {"path_prefix", "/apis/resource.k8s.io/v1/namespaces/"}})
                  .ok());
  auto c = client->GetResourceClaim("ns", "c", std::chrono::steady_clock::now() + std::chrono::milliseconds(1500));
  EXPECT_EQ(c.status().code(), StatusCode::kDeadlineExceeded) << c.status().ToString();
  EXPECT_TRUE(c.status().retryable());
  // At most the first slow attempt and one cut short by the deadline; without
  // a deadline the client makes all five.
  auto seen = server.Requests();
  ASSERT_TRUE(seen.ok());
  EXPECT_GE(seen->size(), 1u);
  EXPECT_LE(seen->size(), 2u) << seen->dump();
}

// Retry-After too large for any integer aborted the plugin, at startup too
// (the slices LIST): now it is clamped, in seconds or as an HTTP date.
TEST(KubeClientApiServerTest, AnyRetryAfterIsSurvivedAndClamped) {
  TestApiServer server;
  ASSERT_TRUE(server.ok()) << server.error();
  ASSERT_TRUE(server.LoadFile(kFixtures + "/core.v1.Node.json").ok());
  std::vector<std::chrono::nanoseconds> sleeps;
  KubeClientOptions o = Fast();
  o.max_retry_after = std::chrono::seconds(60);
  o.sleep = [&](std::chrono::nanoseconds d) { sleeps.push_back(d); };
  auto client = KubeClient::FromConfig(server.Config(), o);
  ASSERT_TRUE(client->ResourceApiVersion().ok());
  ASSERT_TRUE(server.InjectFault({{"status", 429}, {"retry_after", "99999999999999999999"}, {"count", 1}}).ok());
  ASSERT_TRUE(
      server.InjectFault({{"status", 503}, {"retry_after", "Fri, 31 Dec 9999 23:59:59 GMT"}, {"count", 1}}).ok());
  ASSERT_TRUE(server.InjectFault({{"status", 429}, {"retry_after", "later"}, {"count", 1}}).ok());
  auto slices = client->ListJson("/apis/resource.k8s.io/v1/resourceslices", "", "spec.nodeName=n1");
  ASSERT_TRUE(slices.ok()) << slices.status().ToString();
  ASSERT_EQ(sleeps.size(), 3u);
  EXPECT_EQ(sleeps[0], std::chrono::seconds(60));
  EXPECT_EQ(sleeps[1], std::chrono::seconds(60));
  EXPECT_LT(sleeps[2], std::chrono::seconds(1));  // garbage: our own backoff
  EXPECT_TRUE(client->GetNode("nameValue").ok());
}

// What the API server sends is decoded strictly: malformed results and
// absurd nesting are errors, never a claim with zero devices or a crash.
TEST(KubeClientApiServerTest, MalformedAndDeepClaimsAreErrors) {
  TestApiServer server;
  ASSERT_TRUE(server.ok()) << server.error();
  auto client = KubeClient::FromConfig(server.Config(), Fast());
  ASSERT_TRUE(client->ResourceApiVersion().ok());
  const std::string path = "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c";
  auto served = [](const std::string& results) {
    return R"({"kind":"ResourceClaim","apiVersion":"resource.k8s.io/v1","metadata":{"name":"c","namespace":"ns",)"
           R"("uid":"u","resourceVersion":"5"},"status":{"allocation":{"devices":{"results":)" +
           results + "}}}}";
  };
  for (const std::string& results : {std::string("{}"), std::string("[null]"), std::string("[7]")}) {
    ASSERT_TRUE(server.InjectFault({{"raw_body", served(results)}, {"path_prefix", path}}).ok());
    auto c = client->GetResourceClaim("ns", "c");
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << results;
    EXPECT_NE(c.status().message().find("unexpected shape"), std::string::npos) << c.status().message();
  }
  const std::string deep = std::string(70'000, '[') + std::string(70'000, ']');
  ASSERT_TRUE(
      server.InjectFault({{"raw_body", served("[]").insert(1, R"("x":)" + deep + ",")}, {"path_prefix", path}}).ok());
  auto c = client->GetResourceClaim("ns", "c");
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("deeper than"), std::string::npos) << c.status().ToString();
  ASSERT_TRUE(server.InjectFault({{"raw_body", deep}, {"path_prefix", "/api/v1/nodes"}}).ok());
  EXPECT_EQ(client->GetNode("n").status().code(), StatusCode::kInvalidArgument);
}

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new TestApiServer(nvdra::testing::ClientCertTlsOptions({kFixtures + "/core.v1.Node.json"}));
    ASSERT_TRUE(server_->ok()) << server_->error();
  }
  static void TearDownTestSuite() { delete server_; }
  static TestApiServer* server_;
};
TestApiServer* TlsTest::server_ = nullptr;

TEST_F(TlsTest, ClientCertificateFiles) {
  KubeConfig c = server_->Config();
  c.token.clear();
  EXPECT_TRUE(KubeClient::FromConfig(c, Fast())->GetNode("nameValue").ok());
}

TEST_F(TlsTest, KubeconfigWithCaDataAndCertFiles) {
  auto c = LoadKubeconfig(server_->kubeconfig_path());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->ca_pem.empty());
  auto node = KubeClient::FromConfig(*c, Fast())->GetNode("nameValue");
  EXPECT_TRUE(node.ok()) << node.status().ToString();
}

TEST_F(TlsTest, ClientCertificateData) {
  KubeConfig c = server_->Config();
  c.token.clear();
  c.client_cert_pem = *ReadFileToString(c.client_cert_file);
  c.client_key_pem = *ReadFileToString(c.client_key_file);
  c.ca_pem = *ReadFileToString(c.ca_file);
  c.client_cert_file.clear();
  c.client_key_file.clear();
  c.ca_file.clear();
  auto node = KubeClient::FromConfig(c, Fast())->GetNode("nameValue");
  EXPECT_TRUE(node.ok()) << node.status().ToString();
}

TEST_F(TlsTest, TokenAndRotatedTokenFile) {
  KubeConfig c;
  c.server = server_->url();
  c.ca_file = server_->tls_dir() + "/ca.crt";
  c.token_file = server_->dir() + "/token";
  ASSERT_TRUE(WriteFileAtomically(c.token_file, "wrong\n").ok());
  auto client = KubeClient::FromConfig(c, Fast());
  EXPECT_EQ(client->GetNode("nameValue").status().code(), StatusCode::kPermissionDenied);
  ASSERT_TRUE(WriteFileAtomically(c.token_file, "s3cret\n").ok());
  auto node = client->GetNode("nameValue");
  EXPECT_TRUE(node.ok()) << node.status().ToString();
}

TEST_F(TlsTest, UnknownCaFailsClearly) {
  KubeConfig c;
  c.server = server_->url();
  c.token = "s3cret";
  c.ca_file = server_->tls_dir() + "/server.crt";  // not the CA that signed it... a leaf, not a trust anchor
  c.ca_pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  auto r = KubeClient::FromConfig(c, Fast())->GetNode("nameValue");
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
  c.ca_pem.clear();
  c.ca_file = "/nonexistent/ca.crt";
  r = KubeClient::FromConfig(c, Fast())->GetNode("nameValue");
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
  EXPECT_NE(r.status().message().find("certificate-authority"), std::string::npos);
}

TEST_F(TlsTest, InsecureSkipsVerification) {
  KubeConfig c;
  c.server = server_->url();
  c.token = "s3cret";
  c.insecure_skip_tls_verify = true;
  EXPECT_TRUE(KubeClient::FromConfig(c, Fast())->GetNode("nameValue").ok());
  c.insecure_skip_tls_verify = false;
  c.ca_file = "/etc/ssl/certs/ca-certificates.crt";
  auto r = KubeClient::FromConfig(c, Fast())->GetNode("nameValue");
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
  EXPECT_NE(r.status().message().find("TLS verification"), std::string::npos);
}

TEST_F(TlsTest, NoCredentialsIsUnauthorized) {
  KubeConfig c;
  c.server = server_->url();
  c.ca_file = server_->tls_dir() + "/ca.crt";
  auto r = KubeClient::FromConfig(c, Fast())->GetNode("nameValue");
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(r.status().message().find("Unauthorized"), std::string::npos);
}

}  // namespace
}  // namespace nvdra::kube

namespace nvdra::kube {
namespace {

TEST(KubeClientApiServerTest, ResourceSliceRestSemantics) {
  TestApiServer server;
  ASSERT_TRUE(server.ok()) << server.error();
  auto client = KubeClient::FromConfig(server.Config(), Fast());
  const std::string base = "/apis/resource.k8s.io/v1/resourceslices";
  json slice = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceSlice"},
                {"metadata", {{"generateName", "00000-gpu.nvidia.com-n1-"}}},
                {"spec",
                 {{"driver", "gpu.nvidia.com"},
                  {"nodeName", "n1"},
                  {"pool", {{"name", "n1"}, {"generation", 1}, {"resourceSliceCount", 1}}},
                  {"devices", json::array()}}}};
  auto created = client->CreateJson(base, slice);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  std::string name = (*created)["metadata"]["name"];
  EXPECT_EQ(name.rfind("00000-gpu.nvidia.com-n1-", 0), 0u);
  EXPECT_EQ(name.size(), std::string("00000-gpu.nvidia.com-n1-").size() + 5);
  std::string uid = (*created)["metadata"]["uid"], rv = (*created)["metadata"]["resourceVersion"];

  json dup = *created;
  EXPECT_EQ(client->CreateJson(base, dup).status().code(), StatusCode::kAlreadyExists);

  // PUT with the current resourceVersion works; with a stale one it is a 409.
  json upd = *created;
  upd["spec"]["pool"]["generation"] = 2;
  auto updated = client->UpdateJson(base + "/" + name, upd);
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  EXPECT_NE((*updated)["metadata"]["resourceVersion"], rv);
  auto stale = client->UpdateJson(base + "/" + name, upd);
  EXPECT_EQ(stale.status().code(), StatusCode::kConflict);
  EXPECT_NE(stale.status().message().find("the object has been modified"), std::string::npos);
  upd["metadata"].erase("resourceVersion");
  EXPECT_EQ(client->UpdateJson(base + "/" + name, upd).status().code(), StatusCode::kInvalidArgument);

  // Field selectors: supported fields filter, others are a 400.
  EXPECT_EQ(client->ListJson(base, "", "spec.nodeName=n1,spec.driver=gpu.nvidia.com")->at("items").size(), 1u);
  EXPECT_EQ(client->ListJson(base, "", "spec.nodeName=n2")->at("items").size(), 0u);
  EXPECT_EQ(client->ListJson(base, "", "spec.driver!=gpu.nvidia.com")->at("items").size(), 0u);
  EXPECT_EQ(client->ListJson(base, "", "spec.bogus=x").status().code(), StatusCode::kInvalidArgument);

  // DELETE preconditions.
  EXPECT_EQ(client->Delete(base + "/" + name, "other-uid").code(), StatusCode::kConflict);
  EXPECT_EQ(client->Delete(base + "/" + name, uid, rv).code(), StatusCode::kConflict);  // rv is stale
  std::string cur_rv = (*updated)["metadata"]["resourceVersion"];
  EXPECT_TRUE(client->Delete(base + "/" + name, uid, cur_rv).ok());
  EXPECT_EQ(client->Delete(base + "/" + name).code(), StatusCode::kNotFound);

  // Too many devices is Invalid, like the real validation.
  json big = slice;
  for (int i = 0; i < 129; ++i) big["spec"]["devices"].push_back({{"name", "d" + std::to_string(i)}});
  EXPECT_EQ(client->CreateJson(base, big).status().code(), StatusCode::kInvalidArgument);
  // Claims are read-only here, as they are for a node plugin's RBAC-less paths.
  EXPECT_EQ(client->CreateJson("/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims", json::object()).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(KubeClientApiServerTest, ComputeDomainCustomResources) {
  TestApiServer server;
  ASSERT_TRUE(server.ok()) << server.error();
  json cd = {{"apiVersion", "resource.nvidia.com/v1beta1"},
             {"kind", "ComputeDomain"},
             {"metadata", {{"name", "cd1"}, {"namespace", "team"}, {"uid", "cd-uid"}, {"labels", {{"app", "a"}}}}},
             {"spec", {{"numNodes", 2}, {"channel", {{"resourceClaimTemplate", {{"name", "t"}}}}}}}};
  json clique = {{"apiVersion", "resource.nvidia.com/v1beta1"},
                 {"kind", "ComputeDomainClique"},
                 {"metadata",
                  {{"name", "cd-uid.clique-1"},
                   {"namespace", "team"},
                   {"labels", {{"resource.nvidia.com/computeDomain", "cd-uid"}}}}}};
  ASSERT_TRUE(server.LoadObject(cd).ok());
  ASSERT_TRUE(server.LoadObject(clique).ok());
  auto client = KubeClient::FromConfig(server.Config(), Fast());
  auto got = client->GetJson("/apis/resource.nvidia.com/v1beta1/namespaces/team/computedomains/cd1");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)["metadata"]["uid"], "cd-uid");
  EXPECT_EQ((*got)["spec"]["numNodes"], 2);
  auto list = client->ListJson("/apis/resource.nvidia.com/v1beta1/computedomaincliques",
                               "resource.nvidia.com/computeDomain=cd-uid");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ((*list)["items"].size(), 1u);
  EXPECT_EQ((*list)["kind"], "ComputeDomainCliqueList");
  EXPECT_EQ(
      client->ListJson("/apis/resource.nvidia.com/v1beta1/namespaces/team/computedomains", "app=b")->at("items").size(),
      0u);
  EXPECT_EQ(
      client->ListJson("/apis/resource.nvidia.com/v1beta1/namespaces/team/computedomains", "app")->at("items").size(),
      1u);
  EXPECT_EQ(client->GetJson("/apis/resource.nvidia.com/v1beta1/namespaces/other/computedomains/cd1").status().code(),
            StatusCode::kNotFound);

  // Objects can also come from a multi-document YAML file.
  std::string yaml_path = server.dir() + "/objects.yaml";
  ASSERT_TRUE(WriteFileAtomically(yaml_path, R"(apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomain
metadata:
  name: cd2
  namespace: team
spec:
  numNodes: 4
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: imex
  namespace: team
  uid: 11111111-2222-3333-4444-555555555555
status:
  allocation:
    devices:
      results:
      - {request: channel, driver: compute-domain.nvidia.com, pool: node1, device: channel-0}
)")
                  .ok());
  ASSERT_TRUE(server.LoadFile(yaml_path).ok());
  EXPECT_EQ(
      (*client->GetJson("/apis/resource.nvidia.com/v1beta1/namespaces/team/computedomains/cd2"))["spec"]["numNodes"],
      4);
  auto claim = client->GetResourceClaim("team", "imex");
  ASSERT_TRUE(claim.ok()) << claim.status().ToString();
  EXPECT_EQ(claim->uid, "11111111-2222-3333-4444-555555555555");
  EXPECT_EQ(claim->results.at(0).device, "channel-0");
  // Kinds the server does not serve are refused, not silently dropped.
  ASSERT_TRUE(WriteFileAtomically(yaml_path, "apiVersion: v1\nkind: Secret\nmetadata: {name: p}\n").ok());
  EXPECT_FALSE(server.LoadFile(yaml_path).ok());
}

}  // namespace
}  // namespace nvdra::kube

namespace nvdra::kube {
namespace {

TEST(KubeClientApiServerTest, ConcurrentCallersShareOneClient) {
  TestApiServer server;
  ASSERT_TRUE(server.ok()) << server.error();
  ASSERT_TRUE(server.LoadObject(Claim("ns", "c", true)).ok());
  auto client = KubeClient::FromConfig(server.Config(), Fast());
  std::string uid = client->GetResourceClaim("ns", "c")->uid;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        auto c = client->GetResourceClaim("ns", "c");
        ok += c.ok() && c->uid == uid;
      }
    });
  }
  for (auto& t : threads) t.join();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(ok.load(), 200);
  ::testing::Test::RecordProperty("get_claim_200_ms", static_cast<int>(ms));
  // Discovery ran once, not once per thread.
  auto reqs = server.Requests();
  ASSERT_TRUE(reqs.ok());
  int discovery = 0;
  for (const auto& r : *reqs) discovery += r["path"] == "/apis/resource.k8s.io";
  EXPECT_EQ(discovery, 1);
}

}  // namespace
}  // namespace nvdra::kube
