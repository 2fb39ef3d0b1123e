#include "computedomain/kube_compute_domain_source.h"

#include <gtest/gtest.h>

#include "test_apiserver.h"

namespace nvdra::computedomain {
namespace {

using namespace std::chrono_literals;

nlohmann::json Domain(const std::string& name, const std::string& uid, nlohmann::json status) {
  nlohmann::json cd = {{"apiVersion", "resource.nvidia.com/v1beta1"},
                       {"kind", "ComputeDomain"},
                       {"metadata", {{"name", name}, {"namespace", "default"}, {"uid", uid}}},
                       {"spec", {{"numNodes", 1}}}};
  cd["status"] = std::move(status);
  return cd;
}

TEST(KubeComputeDomainSourceTest, StatusShapesThatAreNotObjectsMeanNotReadyInsteadOfThrowing) {
  testing::TestApiServer server;
  ASSERT_TRUE(server.ok()) << server.error();
  kube::KubeClientOptions o;
  o.qps = 0;
  o.initial_backoff = 1ms;
  o.max_attempts = 2;
  o.max_retry_after = 0s;
  auto client = kube::KubeClient::FromConfig(server.Config(), o);
  ASSERT_TRUE(server.LoadObject(Domain("a", "cd-a", nullptr)).ok());
  ASSERT_TRUE(server.LoadObject(Domain("b", "cd-b", {{"nodes", nullptr}})).ok());
  ASSERT_TRUE(server.LoadObject(Domain("c", "cd-c", {{"nodes", {"node-1", {{"name", "node-1"}, {"status", "Ready"}}}}})).ok());
  KubeComputeDomainSource domains(*client, "node-1");
  for (const char* uid : {"cd-a", "cd-b"}) {
    Result<ComputeDomainInfo> info = Internal("not run");
    EXPECT_NO_THROW(info = domains.Get(uid)) << uid;
    ASSERT_TRUE(info.ok()) << uid << ": " << info.status().ToString();
    EXPECT_EQ(info->name, uid == std::string("cd-a") ? "a" : "b");
    EXPECT_FALSE(info->node_ready);
  }
  auto c = domains.Get("cd-c");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->node_ready) << "the well-formed entry still counts";
  EXPECT_EQ(domains.Get("cd-x").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace nvdra::computedomain
