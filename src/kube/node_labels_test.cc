// UpdateNodeLabel against the test API server: a merge patch of one label,
// optimistic concurrency with the Node's resourceVersion, and nothing lost
// when another writer races or the cached copy is not the Node at all.
#include "kube/node_labels.h"

#include <gtest/gtest.h>

#include "test_apiserver.h"

namespace nvdra::kube {
namespace {

using nlohmann::json;
using nvdra::testing::TestApiServer;

constexpr const char* kKey = "resource.nvidia.com/computeDomain";

KubeClientOptions NodeLabelsClientOptions() {
  KubeClientOptions o;
  o.qps = 0;
  o.initial_backoff = std::chrono::milliseconds(1);
  o.max_retry_after = std::chrono::seconds(0);
  return o;
}

LabelRule SetTo(const std::string& v) {
  return [v](const std::optional<std::string>& cur) -> Result<std::optional<std::string>> {
    if (cur && *cur != v) return FailedPrecondition("label already exists for a different ComputeDomain");
    return std::optional<std::string>(v);
  };
}

class NodeLabelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.ok()) << server_.error();
    ASSERT_TRUE(server_
                    .LoadObject({{"apiVersion", "v1"},
                                 {"kind", "Node"},
                                 {"metadata", {{"name", "n1"}, {"labels", {{"kubernetes.io/hostname", "n1"}}}}}})
                    .ok());
    client_ = KubeClient::FromConfig(server_.Config(), NodeLabelsClientOptions());
  }
  json Node() { return (*server_.Objects("nodes"))[0]; }

  TestApiServer server_;
  std::unique_ptr<KubeClient> client_;
};

TEST(ResourceVersionTest, OnlyDecimalVersionsAreOrderedAnythingElseOnlyByEquality) {
  EXPECT_TRUE(ResourceVersionNotOlder("12", "12"));
  EXPECT_TRUE(ResourceVersionNotOlder("100", "99"));  // numbers, not text: "100" < "99" as text
  EXPECT_FALSE(ResourceVersionNotOlder("99", "100"));
  EXPECT_FALSE(ResourceVersionNotOlder("", "5"));
  // Beyond 64 bits, or not a number: not known to be as new.
  EXPECT_FALSE(ResourceVersionNotOlder("999999999999999999999999", "5"));
  EXPECT_FALSE(ResourceVersionNotOlder("abc", "5"));
  EXPECT_FALSE(ResourceVersionNotOlder("6", "abc"));
  EXPECT_TRUE(ResourceVersionNotOlder("abc", "abc"));
  EXPECT_EQ(ResourceVersionOf(json{{"metadata", {{"resourceVersion", "7"}}}}), "7");
  EXPECT_EQ(ResourceVersionOf(json{{"metadata", {{"resourceVersion", 7}}}}), "");
  EXPECT_EQ(ResourceVersionOf(json::array()), "");
}

TEST_F(NodeLabelsTest, SetsFromAFreshReadAndKeepsOtherLabels) {
  auto r = UpdateNodeLabel(*client_, "n1", kKey, SetTo("uid-1"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->written);
  EXPECT_EQ(r->requests, 2);  // GET + PATCH
  EXPECT_EQ(Node()["metadata"]["labels"][kKey], "uid-1");
  EXPECT_EQ(Node()["metadata"]["labels"]["kubernetes.io/hostname"], "n1");
  // Already set: decided from the copy, no write.
  json cached = Node();
  auto again = UpdateNodeLabel(*client_, "n1", kKey, SetTo("uid-1"), &cached);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->written);
  EXPECT_EQ(again->requests, 0);
}

TEST_F(NodeLabelsTest, AStaleCopyConflictsThenRereadsAndKeepsTheOtherWritersLabel) {
  json stale = Node();
  // Another writer changes the Node after our copy was taken.
  json theirs = Node();
  theirs["metadata"]["labels"]["other"] = "x";
  ASSERT_TRUE(client_->UpdateJson("/api/v1/nodes/n1", theirs).ok());
  auto r = UpdateNodeLabel(*client_, "n1", kKey, SetTo("uid-1"), &stale);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->requests, 3);  // PATCH (409), GET, PATCH
  EXPECT_EQ(Node()["metadata"]["labels"][kKey], "uid-1");
  EXPECT_EQ(Node()["metadata"]["labels"]["other"], "x");
}

TEST_F(NodeLabelsTest, TheRuleSeesTheFreshValueAfterAConflict) {
  json stale = Node();
  json theirs = Node();
  theirs["metadata"]["labels"][kKey] = "uid-2";
  ASSERT_TRUE(client_->UpdateJson("/api/v1/nodes/n1", theirs).ok());
  auto r = UpdateNodeLabel(*client_, "n1", kKey, SetTo("uid-1"), &stale);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "label already exists for a different ComputeDomain");
  EXPECT_EQ(Node()["metadata"]["labels"][kKey], "uid-2");
}

TEST_F(NodeLabelsTest, RemovesAndGivesUpAfterPersistentConflicts) {
  ASSERT_TRUE(UpdateNodeLabel(*client_, "n1", kKey, SetTo("uid-1")).ok());
  ASSERT_TRUE(server_.InjectFault({{"status", 409}, {"method", "PATCH"}, {"count", -1}}).ok());
  auto remove = [](const std::optional<std::string>&) -> Result<std::optional<std::string>> {
    return std::optional<std::string>();
  };
  auto r = UpdateNodeLabel(*client_, "n1", kKey, remove, nullptr, 3);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kConflict);
  EXPECT_NE(r.status().message().find("after 3 attempts"), std::string::npos) << r.status().message();
  ASSERT_TRUE(server_.ClearFaults().ok());
  auto ok = UpdateNodeLabel(*client_, "n1", kKey, remove);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_FALSE(Node()["metadata"]["labels"].contains(kKey));
}

TEST_F(NodeLabelsTest, ACachedObjectOfAnotherKindIsNeverWrittenAsTheNode) {
  json node = Node();
  node["spec"] = {{"podCIDR", "10.0.0.0/24"}};
  ASSERT_TRUE(client_->UpdateJson("/api/v1/nodes/n1", node).ok());
  // What a hostile watch answered for this Node: a Pod of its name, no
  // resourceVersion, no labels.
  json pod = {{"kind", "Pod"},
              {"metadata", {{"name", "n1"}, {"uid", "zzz"}}},
              {"spec", {{"containers", json::array()}}}};
  auto r = UpdateNodeLabel(*client_, "n1", kKey, SetTo("uid-1"), &pod);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->requests, 2);  // the copy is unusable: GET + PATCH
  json after = Node();
  EXPECT_EQ(after["metadata"]["labels"][kKey], "uid-1");
  EXPECT_EQ(after["metadata"]["labels"]["kubernetes.io/hostname"], "n1");
  EXPECT_EQ(after["spec"]["podCIDR"], "10.0.0.0/24");
  EXPECT_FALSE(after["spec"].contains("containers"));
  EXPECT_EQ(*server_.Count("update", "nodes"), 1);  // only this test's own setup PUT
}

TEST_F(NodeLabelsTest, ALabelChangeIsAPatchThatLeavesEverythingElseOfTheNode) {
  json cached = Node();
  // Another writer adds a field after the copy was taken; the patch is
  // refused as stale, re-decided on the fresh Node and keeps that field.
  json theirs = Node();
  theirs["spec"] = {{"unschedulable", true}};
  ASSERT_TRUE(client_->UpdateJson("/api/v1/nodes/n1", theirs).ok());
  auto r = UpdateNodeLabel(*client_, "n1", kKey, SetTo("uid-1"), &cached);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*server_.Count("patch", "nodes"), 2);
  EXPECT_EQ(*server_.Count("update", "nodes"), 1);
  EXPECT_EQ(Node()["spec"]["unschedulable"], true);
  EXPECT_EQ(Node()["metadata"]["labels"][kKey], "uid-1");
}

}  // namespace
}  // namespace nvdra::kube
