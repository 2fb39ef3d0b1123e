// DomainWatch against the test API server: readiness from cliques (with the
// ComputeDomainCliques gate) or from status.nodes, waits that end on the
// watch's change, and lookups that cost no API call.
#include "computedomain/domain_watch.h"

#include <future>

#include <gtest/gtest.h>

#include "test_apiserver.h"

namespace nvdra::computedomain {
namespace {

using nlohmann::json;
using nvdra::testing::TestApiServer;
using Steady = std::chrono::steady_clock;

constexpr const char* kNode = "node-1";
constexpr const char* kClique = "5e2c8a14-7d3b-4f9e-a1c6-0b8d2f4e6a90.32766";
constexpr const char* kDriverNs = "nvidia-dra-driver";

kube::KubeClientOptions Fast() {
  kube::KubeClientOptions o;
  o.qps = 0;
  o.initial_backoff = std::chrono::milliseconds(1);
  o.max_retry_after = std::chrono::seconds(0);
  return o;
}

json Domain(const std::string& uid, const std::string& node_status) {
  json cd = {{"apiVersion", "resource.nvidia.com/v1beta1"},
             {"kind", "ComputeDomain"},
             {"metadata", {{"name", "cd-" + uid}, {"namespace", "team-a"}, {"uid", uid}}},
             {"spec", {{"numNodes", 0}, {"channel", {{"resourceClaimTemplate", {{"name", "ch"}}}}}}},
             {"status", {{"status", "NotReady"}, {"nodes", json::array()}}}};
  if (!node_status.empty()) {
    cd["status"]["nodes"].push_back(
        {{"name", kNode}, {"cliqueID", kClique}, {"ipAddress", "10.0.0.1"}, {"index", 0}, {"status", node_status}});
  }
  cd["status"]["nodes"].push_back(
      {{"name", "other-node"}, {"cliqueID", kClique}, {"ipAddress", "10.0.0.2"}, {"index", 1}, {"status", "Ready"}});
  return cd;
}

json Clique(const std::string& uid, const std::string& node_status) {
  json c = {{"apiVersion", "resource.nvidia.com/v1beta1"},
            {"kind", "ComputeDomainClique"},
            {"metadata", {{"name", uid + "." + kClique}, {"namespace", kDriverNs}}},
            {"daemons", json::array({{{"nodeName", "other-node"},
                                      {"cliqueID", kClique},
                                      {"ipAddress", "10.0.0.2"},
                                      {"index", 1},
                                      {"status", "Ready"}}})}};
  if (!node_status.empty()) {
    c["daemons"].push_back(
        {{"nodeName", kNode}, {"cliqueID", kClique}, {"ipAddress", "10.0.0.1"}, {"index", 0}, {"status", node_status}});
  }
  return c;
}

// Waits on the watch's changes (no fixed sleeps) until the state's
// not-ready reason contains `text`; returns the state then.
ComputeDomainInfo WaitReason(const DomainWatch& w, const std::string& uid, const std::string& text) {
  auto deadline = Steady::now() + std::chrono::seconds(15);
  uint64_t seen = w.domains().notifier().version();
  for (;;) {
    auto st = w.Lookup(uid);
    if ((st.ok() && st->not_ready.find(text) != std::string::npos) || Steady::now() >= deadline) {
      return st.ok() ? *st : ComputeDomainInfo{};
    }
    seen = w.domains().notifier().WaitForChange(seen, deadline);
  }
}

class DomainWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.ok()) << server_.error();
    client_ = kube::KubeClient::FromConfig(server_.Config(), Fast());
  }
  static DomainWatchOptions Options(bool cliques = true) {
    DomainWatchOptions o;
    o.node_name = kNode;
    o.clique_namespace = kDriverNs;
    o.cliques = cliques;
    o.clique_id = kClique;
    o.initial_backoff = std::chrono::milliseconds(10);
    o.max_backoff = std::chrono::milliseconds(100);
    return o;
  }
  std::unique_ptr<DomainWatch> Watch(bool cliques) {
    auto w = std::make_unique<DomainWatch>(*client_, Options(cliques));
    w->Activate();
    EXPECT_TRUE(w->WaitSynced(Steady::now() + std::chrono::seconds(15)));
    return w;
  }
  TestApiServer server_;
  std::unique_ptr<kube::KubeClient> client_;
};

TEST_F(DomainWatchTest, WithCliquesTheNodesDaemonInTheCliqueDecides) {
  ASSERT_TRUE(server_.LoadObject(Domain("d1", "Ready")).ok());  // status.nodes is not what counts here
  auto w = Watch(true);
  auto st = w->Get("d1");
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->ns, "team-a");
  EXPECT_EQ(st->name, "cd-d1");
  EXPECT_FALSE(st->node_ready);
  EXPECT_NE(st->not_ready.find(std::string("ComputeDomainClique ") + kDriverNs + "/d1." + kClique + " does not exist"),
            std::string::npos)
      << st->not_ready;

  ASSERT_TRUE(server_.LoadObject(Clique("d1", "")).ok());
  auto later = WaitReason(*w, "d1", "lists no daemon for node node-1");
  EXPECT_FALSE(later.node_ready);
  EXPECT_NE(later.not_ready.find("lists no daemon for node node-1"), std::string::npos) << later.not_ready;

  ASSERT_TRUE(server_.LoadObject(Clique("d1", "NotReady")).ok());
  later = WaitReason(*w, "d1", "is NotReady");
  EXPECT_NE(later.not_ready.find("the daemon for node node-1 in ComputeDomainClique"), std::string::npos)
      << later.not_ready;
  // A wait that ends at its deadline returns the state and what is missing.
  auto timed_out = w->WaitReady("d1", Steady::now() + std::chrono::milliseconds(200));
  ASSERT_TRUE(timed_out.ok());
  EXPECT_FALSE(timed_out->node_ready);

  // A waiter wakes on the watch event, well before its deadline.
  auto waiter = std::async(std::launch::async,
                           [&] { return w->WaitReady("d1", Steady::now() + std::chrono::seconds(60)); });
  ASSERT_TRUE(server_.LoadObject(Clique("d1", "Ready")).ok());
  auto ready = waiter.get();
  ASSERT_TRUE(ready.ok());
  EXPECT_TRUE(ready->node_ready);
  EXPECT_EQ(*server_.Count("get", "computedomaincliques"), 0);
  EXPECT_EQ(*server_.Count("list", "computedomaincliques"), 1);
  EXPECT_EQ(*server_.Count("list", "computedomains"), 1);
}

TEST_F(DomainWatchTest, CliquesOfOtherNamespacesAndOtherCliqueIdsDoNotCount) {
  ASSERT_TRUE(server_.LoadObject(Domain("d1", "")).ok());
  json elsewhere = Clique("d1", "Ready");
  elsewhere["metadata"]["namespace"] = "default";
  ASSERT_TRUE(server_.LoadObject(elsewhere).ok());
  auto w = Watch(true);
  EXPECT_FALSE(w->Get("d1")->node_ready);
  ASSERT_TRUE(server_.LoadObject(Clique("d1", "Ready")).ok());
  ASSERT_TRUE(w->WaitReady("d1", Steady::now() + std::chrono::seconds(15))->node_ready);
  // The fabric was repartitioned: this node is now in another clique.
  w->SetCliqueId("5e2c8a14-7d3b-4f9e-a1c6-0b8d2f4e6a90.7");
  EXPECT_FALSE(w->Get("d1")->node_ready);
}

TEST_F(DomainWatchTest, WithoutCliquesStatusNodesDecides) {
  ASSERT_TRUE(server_.LoadObject(Domain("d1", "")).ok());
  ASSERT_TRUE(server_.LoadObject(Clique("d1", "Ready")).ok());  // ignored without the gate
  auto w = Watch(false);
  auto st = w->Get("d1");
  ASSERT_TRUE(st.ok());
  EXPECT_FALSE(st->node_ready);
  EXPECT_NE(st->not_ready.find("ComputeDomain team-a/cd-d1 status.nodes does not list node node-1"), std::string::npos)
      << st->not_ready;
  ASSERT_TRUE(server_.LoadObject(Domain("d1", "NotReady")).ok());
  auto nr = WaitReason(*w, "d1", "is NotReady");
  EXPECT_NE(nr.not_ready.find("node node-1 is NotReady in ComputeDomain team-a/cd-d1 status.nodes"), std::string::npos)
      << nr.not_ready;
  ASSERT_TRUE(server_.LoadObject(Domain("d1", "Ready")).ok());
  EXPECT_TRUE(w->WaitReady("d1", Steady::now() + std::chrono::seconds(15))->node_ready);
  EXPECT_EQ(w->cliques(), nullptr);
  EXPECT_EQ(*server_.Count("list", "computedomaincliques"), 0);
}

TEST_F(DomainWatchTest, UnknownDomainsAreNotFoundAndDeletedOnesStopExisting) {
  ASSERT_TRUE(server_.LoadObject(Domain("d1", "Ready")).ok());
  auto w = Watch(false);
  auto missing = w->WaitReady("nope", Steady::now() + std::chrono::seconds(60));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "ComputeDomain not found: nope");
  EXPECT_EQ(w->Exists("d1"), std::optional<bool>(true));
  ASSERT_TRUE(server_.DeleteObject("computedomains", "team-a", "cd-d1").ok());
  auto deadline = Steady::now() + std::chrono::seconds(15);
  uint64_t seen = w->domains().notifier().version();
  while (w->Exists("d1") != std::optional<bool>(false) && Steady::now() < deadline) {
    seen = w->domains().notifier().WaitForChange(seen, deadline);
  }
  EXPECT_EQ(w->Exists("d1"), std::optional<bool>(false));
}

TEST_F(DomainWatchTest, StatusShapesThatAreNotObjectsMeanNotReadyInsteadOfThrowing) {
  json null_status = Domain("d1", "");
  null_status["status"] = nullptr;
  json null_nodes = Domain("d2", "");
  null_nodes["status"]["nodes"] = nullptr;
  json odd_entries = Domain("d3", "Ready");
  odd_entries["status"]["nodes"].insert(odd_entries["status"]["nodes"].begin(), json(kNode));
  ASSERT_TRUE(server_.LoadObject(null_status).ok());
  ASSERT_TRUE(server_.LoadObject(null_nodes).ok());
  ASSERT_TRUE(server_.LoadObject(odd_entries).ok());
  auto w = Watch(false);
  for (const char* uid : {"d1", "d2"}) {
    Result<ComputeDomainInfo> st = Internal("not run");
    EXPECT_NO_THROW(st = w->Get(uid)) << uid;
    ASSERT_TRUE(st.ok()) << uid << ": " << st.status().ToString();
    EXPECT_EQ(st->name, std::string("cd-") + uid);
    EXPECT_FALSE(st->node_ready) << uid;
    EXPECT_NE(st->not_ready.find("status.nodes does not list node node-1"), std::string::npos) << st->not_ready;
  }
  auto d3 = w->Get("d3");
  ASSERT_TRUE(d3.ok()) << d3.status().ToString();
  EXPECT_TRUE(d3->node_ready) << "the well-formed entry still counts: " << d3->not_ready;
}

TEST_F(DomainWatchTest, OnlyThisNodesEntriesAreKept) {
  ASSERT_TRUE(server_.LoadObject(Domain("d1", "Ready")).ok());
  ASSERT_TRUE(server_.LoadObject(Clique("d1", "Ready")).ok());
  auto w = Watch(true);
  auto cd = w->domains().GetByUid("d1");
  ASSERT_TRUE(cd);
  ASSERT_EQ((*cd)["status"]["nodes"].size(), 1u);
  EXPECT_EQ((*cd)["status"]["nodes"][0]["name"], kNode);
  EXPECT_FALSE(cd->contains("spec"));
  auto clique = w->cliques()->Get(kDriverNs, std::string("d1.") + kClique);
  ASSERT_TRUE(clique);
  ASSERT_EQ((*clique)["daemons"].size(), 1u);
}

TEST_F(DomainWatchTest, WhereListingCliquesIsForbiddenTheOneCliqueIsRead) {
  // Upstream's Role grants only get on cliques.
  ASSERT_TRUE(server_
                  .InjectFault({{"status", 403},
                                {"verb", "list"},
                                {"path_prefix", "/apis/resource.nvidia.com/v1beta1/namespaces"},
                                {"count", -1}})
                  .ok());
  ASSERT_TRUE(server_.LoadObject(Domain("d1", "")).ok());
  ASSERT_TRUE(server_.LoadObject(Clique("d1", "Ready")).ok());
  DomainWatch w(*client_, Options());
  w.Activate();
  ASSERT_TRUE(w.domains().WaitSynced(Steady::now() + std::chrono::seconds(15)));
  auto deadline = Steady::now() + std::chrono::seconds(15);
  while (w.cliques()->last_error().code() != StatusCode::kPermissionDenied && Steady::now() < deadline) {
    w.domains().notifier().WaitForChange(w.domains().notifier().version(),
                                         Steady::now() + std::chrono::milliseconds(20));
  }
  auto st = w.WaitReady("d1", Steady::now() + std::chrono::seconds(15));
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(st->node_ready) << st->not_ready;
  EXPECT_GE(*server_.Count("get", "computedomaincliques"), 1);
}

TEST_F(DomainWatchTest, ALookupOpensTheWatchesAndTheyCloseOnlyOnceUnusedForTheLinger) {
  ASSERT_TRUE(server_.LoadObject({{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", kNode}}}}).ok());
  ASSERT_TRUE(server_.LoadObject(Domain("d1", "")).ok());
  ASSERT_TRUE(server_.LoadObject(Clique("d1", "Ready")).ok());
  DomainWatchOptions o = Options();
  o.watch_node = true;
  DomainWatch w(*client_, o);
  // An idle node: nothing listed, nothing watched.
  EXPECT_FALSE(w.active());
  EXPECT_EQ(*server_.Count("list", "computedomains"), 0);
  EXPECT_EQ(*server_.OpenWatches("computedomains"), 0);
  EXPECT_FALSE(w.domains().synced());

  // The first claim's lookup opens all three and answers from the list.
  auto st = w.WaitReady("d1", Steady::now() + std::chrono::seconds(15));
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_TRUE(st->node_ready) << st->not_ready;
  EXPECT_TRUE(w.active());
  ASSERT_NE(w.node(), nullptr);
  EXPECT_TRUE(w.node()->synced());
  EXPECT_TRUE(w.node()->Get("", kNode));
  EXPECT_EQ(*server_.Count("list", "computedomains"), 1);
  EXPECT_EQ(*server_.Count("list", "computedomaincliques"), 1);
  EXPECT_EQ(*server_.Count("list", "nodes"), 1);
  EXPECT_TRUE(server_.OpenWatchesReach("computedomains", 1));
  EXPECT_TRUE(server_.OpenWatchesReach("nodes", 1));
  // More lookups while open cost nothing.
  ASSERT_TRUE(w.Get("d1").ok());
  EXPECT_EQ(*server_.Count("list", "computedomains"), 1);
  EXPECT_EQ(w.activations(), 1u);

  // Used a moment ago: an hour's linger keeps them open.
  EXPECT_FALSE(w.DeactivateIfIdle(std::chrono::hours(1)));
  EXPECT_TRUE(w.active());
  // Unused past the linger: closed, emptied, and not trusted.
  EXPECT_TRUE(w.DeactivateIfIdle(std::chrono::seconds(0)));
  EXPECT_FALSE(w.active());
  EXPECT_FALSE(w.domains().synced());
  EXPECT_FALSE(w.node()->synced());
  EXPECT_EQ(w.Lookup("d1").status().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(w.Exists("d1").has_value());  // the directory cleanup waits
  EXPECT_TRUE(server_.OpenWatchesReach("computedomains", 0));
  EXPECT_TRUE(server_.OpenWatchesReach("computedomaincliques", 0));
  EXPECT_TRUE(server_.OpenWatchesReach("nodes", 0));
  EXPECT_FALSE(w.DeactivateIfIdle(std::chrono::seconds(0)));  // already closed

  // A domain created while closed is seen by the next lookup's fresh list.
  ASSERT_TRUE(server_.LoadObject(Domain("d2", "")).ok());
  auto d2 = w.Get("d2");
  ASSERT_TRUE(d2.ok()) << d2.status().ToString();
  EXPECT_EQ(d2->name, "cd-d2");
  EXPECT_EQ(*server_.Count("list", "computedomains"), 2);
  EXPECT_EQ(w.activations(), 2u);

  // Stopped for good: a lookup neither reopens nor waits for a list.
  w.Stop();
  const auto before = Steady::now();
  EXPECT_EQ(w.Get("d1").status().code(), StatusCode::kUnavailable);
  EXPECT_LT(Steady::now() - before, std::chrono::seconds(5));
  EXPECT_FALSE(w.active());
  EXPECT_EQ(w.activations(), 2u);
}

}  // namespace
}  // namespace nvdra::computedomain
