// WatchCache over real HTTP against the test API server: one LIST, then a
// watch that is resumed (not relisted) after drops and server-side ends, and
// relisted only after 410 Gone.
#include "kube/watch_cache.h"

#include <gtest/gtest.h>

#include <set>

#include "test_apiserver.h"

namespace nvdra::kube {
namespace {

using nlohmann::json;
using nvdra::testing::TestApiServer;
using Steady = std::chrono::steady_clock;

constexpr const char* kDomains = "/apis/resource.nvidia.com/v1beta1/computedomains";

KubeClientOptions WatchClientOptions() {
  KubeClientOptions o;
  o.qps = 0;
  o.initial_backoff = std::chrono::milliseconds(1);
  o.max_retry_after = std::chrono::seconds(0);
  o.request_timeout = std::chrono::milliseconds(5000);
  return o;
}

json Domain(const std::string& ns, const std::string& name, const std::string& uid, const std::string& status) {
  return {{"apiVersion", "resource.nvidia.com/v1beta1"},
          {"kind", "ComputeDomain"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"uid", uid}}},
          {"spec", {{"numNodes", 0}, {"channel", {{"resourceClaimTemplate", {{"name", name + "-channel"}}}}}}},
          {"status", {{"status", status}}}};
}

WatchCacheOptions DomainOptions() {
  WatchCacheOptions o;
  o.path = kDomains;
  o.what = "ComputeDomains";
  o.initial_backoff = std::chrono::milliseconds(10);
  o.max_backoff = std::chrono::milliseconds(100);
  return o;
}

// Waits on the cache's change notifier (never a fixed sleep) until `pred`
// holds; false after 15 s. Conditions that no change announces (stats) are
// re-checked at least every 50 ms.
bool WaitFor(const WatchCache& cache, const std::function<bool()>& pred) {
  auto deadline = Steady::now() + std::chrono::seconds(15);
  uint64_t seen = cache.notifier().version();
  while (!pred()) {
    if (Steady::now() >= deadline) return false;
    seen = cache.notifier().WaitForChange(seen, std::min(deadline, Steady::now() + std::chrono::milliseconds(50)));
  }
  return true;
}

std::string Status(const WatchCache::ObjectPtr& o) { return o ? (*o)["status"].value("status", "") : "<absent>"; }

class WatchCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.ok()) << server_.error();
    client_ = KubeClient::FromConfig(server_.Config(), WatchClientOptions());
    ASSERT_TRUE(server_.LoadObject(Domain("team-a", "cd-1", "uid-1", "NotReady")).ok());
  }

  TestApiServer server_;
  std::unique_ptr<KubeClient> client_;
};

TEST_F(WatchCacheTest, ListsOnceThenFollowsAddsUpdatesAndDeletesFromTheWatch) {
  WatchCache cache(*client_, DomainOptions());
  cache.Start();
  ASSERT_TRUE(cache.WaitSynced(Steady::now() + std::chrono::seconds(15)));
  EXPECT_EQ(Status(cache.GetByUid("uid-1")), "NotReady");
  EXPECT_EQ(Status(cache.Get("team-a", "cd-1")), "NotReady");

  ASSERT_TRUE(server_.LoadObject(Domain("team-a", "cd-1", "uid-1", "Ready")).ok());
  ASSERT_TRUE(server_.LoadObject(Domain("team-b", "cd-2", "uid-2", "Ready")).ok());
  ASSERT_TRUE(WaitFor(cache, [&] { return Status(cache.GetByUid("uid-1")) == "Ready" && cache.GetByUid("uid-2"); }));
  ASSERT_TRUE(server_.DeleteObject("computedomains", "team-a", "cd-1").ok());
  ASSERT_TRUE(WaitFor(cache, [&] { return cache.GetByUid("uid-1") == nullptr; }));
  EXPECT_EQ(cache.Get("team-a", "cd-1"), nullptr);
  EXPECT_EQ(cache.List().size(), 1u);

  // Every lookup above was served from memory: one LIST, one WATCH, no GET.
  EXPECT_EQ(*server_.Count("list", "computedomains"), 1);
  EXPECT_EQ(*server_.Count("watch", "computedomains"), 1);
  EXPECT_EQ(*server_.Count("get", "computedomains"), 0);
  auto st = cache.stats();
  EXPECT_EQ(st.lists, 1u);
  EXPECT_EQ(st.events, 3u);
}

TEST_F(WatchCacheTest, AStoppedCacheIsEmptyAndUnsyncedAndAStartAfterItListsAfresh) {
  WatchCache cache(*client_, DomainOptions());
  cache.Start();
  ASSERT_TRUE(cache.WaitSynced(Steady::now() + std::chrono::seconds(15)));
  ASSERT_TRUE(cache.GetByUid("uid-1"));
  const uint64_t before = cache.notifier().version();
  cache.Stop();
  EXPECT_FALSE(cache.synced());
  EXPECT_EQ(cache.GetByUid("uid-1"), nullptr);
  EXPECT_EQ(cache.Get("team-a", "cd-1"), nullptr);
  EXPECT_TRUE(cache.List().empty());
  EXPECT_EQ(cache.stats().objects, 0u);
  EXPECT_NE(cache.notifier().version(), before);  // waiters re-check
  EXPECT_TRUE(WaitFor(cache, [&] { return *server_.OpenWatches("computedomains") == 0; }));
  // What changed while stopped: a deletion and an addition no watch saw.
  ASSERT_TRUE(server_.DeleteObject("computedomains", "team-a", "cd-1").ok());
  ASSERT_TRUE(server_.LoadObject(Domain("team-b", "cd-2", "uid-2", "Ready")).ok());
  cache.Start();
  ASSERT_TRUE(cache.WaitSynced(Steady::now() + std::chrono::seconds(15)));
  EXPECT_EQ(cache.GetByUid("uid-1"), nullptr);
  EXPECT_EQ(Status(cache.GetByUid("uid-2")), "Ready");
  EXPECT_EQ(*server_.Count("list", "computedomains"), 2);
  EXPECT_EQ(cache.stats().lists, 2u);
}

TEST_F(WatchCacheTest, ADroppedWatchIsResumedFromItsResourceVersionWithoutAList) {
  WatchCache cache(*client_, DomainOptions());
  cache.Start();
  ASSERT_TRUE(cache.WaitSynced(Steady::now() + std::chrono::seconds(15)));
  ASSERT_TRUE(WaitFor(cache, [&] { return *server_.OpenWatches("computedomains") == 1; }));
  // Resumes fail for a while (the connection is cut before any answer), and
  // the domain changes meanwhile; the resumed watch must replay that change.
  ASSERT_TRUE(server_.InjectFault({{"drop", true}, {"verb", "watch"}, {"count", 2}}).ok());
  ASSERT_EQ(*server_.WatchAction("drop", "computedomains"), 1);
  ASSERT_TRUE(server_.LoadObject(Domain("team-a", "cd-1", "uid-1", "Ready")).ok());
  ASSERT_TRUE(WaitFor(cache, [&] { return Status(cache.GetByUid("uid-1")) == "Ready"; }));
  EXPECT_EQ(*server_.Count("list", "computedomains"), 1);
  EXPECT_EQ(*server_.Count("watch", "computedomains"), 4);  // first, two cut, the resumed one
  EXPECT_GE(cache.stats().resumes, 3u);
  EXPECT_EQ(cache.stats().relists_after_gone, 0u);
}

TEST_F(WatchCacheTest, HostileWatchEventsAreErrorsAndTheWatchGoesOn) {
  WatchCache cache(*client_, DomainOptions());
  cache.Start();
  ASSERT_TRUE(cache.WaitSynced(Steady::now() + std::chrono::seconds(15)));
  ASSERT_TRUE(WaitFor(cache, [&] { return *server_.OpenWatches("computedomains") == 1; }));
  // The next watch answers with nesting deep enough to overflow a recursive
  // parser, then with events whose object is not an object.
  std::string deep = "{\"type\":\"ADDED\",\"object\":" + std::string(100000, '[') + "\n";
  ASSERT_TRUE(server_.InjectFault({{"verb", "watch"}, {"raw_body", deep}}).ok());
  ASSERT_TRUE(server_
                  .InjectFault({{"verb", "watch"},
                                {"raw_body", "{\"type\":\"ADDED\",\"object\":\"x\"}\n"
                                             "{\"type\":\"DELETED\",\"object\":[1]}\n"}})
                  .ok());
  ASSERT_EQ(*server_.WatchAction("drop", "computedomains"), 1);
  ASSERT_TRUE(WaitFor(cache, [&] { return *server_.Count("watch", "computedomains") >= 4; }));
  // Still alive, still following the domain.
  ASSERT_TRUE(server_.LoadObject(Domain("team-a", "cd-1", "uid-1", "Ready")).ok());
  ASSERT_TRUE(WaitFor(cache, [&] { return Status(cache.GetByUid("uid-1")) == "Ready"; }));
  EXPECT_EQ(cache.List().size(), 1u);
}

TEST_F(WatchCacheTest, ServerSideTimeoutsResumeTheWatch) {
  auto o = DomainOptions();
  o.watch_timeout = std::chrono::seconds(1);
  WatchCache cache(*client_, o);
  cache.Start();
  ASSERT_TRUE(cache.WaitSynced(Steady::now() + std::chrono::seconds(15)));
  ASSERT_TRUE(WaitFor(cache, [&] { return cache.stats().resumes >= 2; }));
  ASSERT_TRUE(server_.LoadObject(Domain("team-a", "cd-1", "uid-1", "Ready")).ok());
  ASSERT_TRUE(WaitFor(cache, [&] { return Status(cache.GetByUid("uid-1")) == "Ready"; }));
  EXPECT_EQ(cache.stats().lists, 1u);
}

// As client-go's reflector: each watch asks for a timeout of at least the
// minimum and under twice it, drawn anew, so that the watches of a fleet
// started together do not all end together.
TEST_F(WatchCacheTest, EachWatchAsksForItsOwnTimeoutBetweenOnceAndTwiceTheMinimum) {
  auto o = DomainOptions();
  o.watch_timeout = std::chrono::seconds(100);
  o.min_healthy_watch = std::chrono::milliseconds(0);
  WatchCache cache(*client_, o);
  cache.Start();
  ASSERT_TRUE(cache.WaitSynced(Steady::now() + std::chrono::seconds(15)));
  constexpr int kWatches = 6;
  for (int i = 1; i < kWatches; ++i) {
    ASSERT_TRUE(WaitFor(cache, [&] { return *server_.OpenWatches("computedomains") == 1; }));
    ASSERT_EQ(*server_.WatchAction("end", "computedomains"), 1);
    ASSERT_TRUE(WaitFor(cache, [&] { return *server_.Count("watch", "computedomains") >= i + 1; }));
  }
  std::set<int> timeouts;
  int watches = 0;
  auto requests = server_.Requests();
  ASSERT_TRUE(requests.ok());
  for (const auto& r : *requests) {
    if (r.value("verb", "") != "watch") continue;
    ++watches;
    std::string q = r.value("query", "");
    auto at = q.find("timeoutSeconds=");
    ASSERT_NE(at, std::string::npos) << q;
    int t = std::stoi(q.substr(at + 15));
    EXPECT_GE(t, 100) << q;
    EXPECT_LT(t, 200) << q;
    timeouts.insert(t);
  }
  EXPECT_GE(watches, kWatches);
  EXPECT_GT(timeouts.size(), 1u);  // 6 draws of 100 values all alike: 1e-10
}

TEST_F(WatchCacheTest, AnExpiredResourceVersionRelistsAndDropsWhatWasDeletedInTheGap) {
  WatchCache cache(*client_, DomainOptions());
  cache.Start();
  ASSERT_TRUE(cache.WaitSynced(Steady::now() + std::chrono::seconds(15)));
  ASSERT_TRUE(WaitFor(cache, [&] { return *server_.OpenWatches("computedomains") == 1; }));
  // The watch is down while the domain is deleted and the history compacted:
  // only a LIST can reveal the deletion.
  ASSERT_TRUE(server_.InjectFault({{"drop", true}, {"verb", "watch"}, {"count", -1}}).ok());
  ASSERT_EQ(*server_.WatchAction("drop", "computedomains"), 1);
  ASSERT_TRUE(server_.DeleteObject("computedomains", "team-a", "cd-1").ok());
  ASSERT_TRUE(server_.LoadObject(Domain("team-b", "cd-2", "uid-2", "Ready")).ok());
  ASSERT_TRUE(server_.CompactWatchHistory().ok());
  ASSERT_TRUE(server_.ClearFaults().ok());
  ASSERT_TRUE(WaitFor(cache, [&] { return cache.GetByUid("uid-1") == nullptr && cache.GetByUid("uid-2"); }));
  EXPECT_EQ(cache.stats().relists_after_gone, 1u);
  EXPECT_EQ(*server_.Count("list", "computedomains"), 2);
}

TEST_F(WatchCacheTest, AGoneAnswerToTheWatchRequestRelists) {
  WatchCache cache(*client_, DomainOptions());
  cache.Start();
  ASSERT_TRUE(cache.WaitSynced(Steady::now() + std::chrono::seconds(15)));
  ASSERT_TRUE(WaitFor(cache, [&] { return *server_.OpenWatches("computedomains") == 1; }));
  ASSERT_TRUE(server_.InjectFault({{"status", 410}, {"verb", "watch"}, {"count", 1}}).ok());
  ASSERT_EQ(*server_.WatchAction("end", "computedomains"), 1);
  ASSERT_TRUE(WaitFor(cache, [&] { return cache.stats().lists == 2; }));
  EXPECT_EQ(cache.stats().relists_after_gone, 1u);
  // And the relisted cache follows the next watch.
  ASSERT_TRUE(server_.LoadObject(Domain("team-a", "cd-1", "uid-1", "Ready")).ok());
  ASSERT_TRUE(WaitFor(cache, [&] { return Status(cache.GetByUid("uid-1")) == "Ready"; }));
}

// Every watch answered 410 Gone at once, or an empty 200: the LISTs and
// WATCHes that follow back off (100, 200, 400, 400 ms plus jitter) instead of
// spending the client's whole request budget.
TEST_F(WatchCacheTest, RelistsAfterAnImmediateGoneBackOff) {
  auto o = DomainOptions();
  o.initial_backoff = std::chrono::milliseconds(100);
  o.max_backoff = std::chrono::milliseconds(400);
  o.min_healthy_watch = std::chrono::seconds(30);
  WatchCache cache(*client_, o);
  cache.Start();
  ASSERT_TRUE(cache.WaitSynced(Steady::now() + std::chrono::seconds(15)));
  ASSERT_TRUE(WaitFor(cache, [&] { return *server_.OpenWatches("computedomains") == 1; }));
  ASSERT_TRUE(server_.InjectFault({{"status", 410}, {"verb", "watch"}, {"count", -1}}).ok());
  ASSERT_EQ(*server_.WatchAction("end", "computedomains"), 1);
  ASSERT_TRUE(WaitFor(cache, [&] { return cache.stats().lists >= 2; }));
  auto second = Steady::now();
  ASSERT_TRUE(WaitFor(cache, [&] { return cache.stats().lists >= 5; }));
  // At least 3 x 400 ms between them (less the 50 ms this test may notice
  // the second one late); without a backoff these LISTs follow each other
  // within milliseconds.
  EXPECT_GE(Steady::now() - second, std::chrono::milliseconds(900));
  EXPECT_GE(cache.stats().relists_after_gone, 4u);
}

TEST_F(WatchCacheTest, WatchesThatEndAtOnceWithAnEmptyAnswerBackOff) {
  auto o = DomainOptions();
  o.initial_backoff = std::chrono::milliseconds(100);
  o.max_backoff = std::chrono::milliseconds(400);
  o.min_healthy_watch = std::chrono::seconds(30);
  WatchCache cache(*client_, o);
  cache.Start();
  ASSERT_TRUE(cache.WaitSynced(Steady::now() + std::chrono::seconds(15)));
  ASSERT_TRUE(WaitFor(cache, [&] { return *server_.OpenWatches("computedomains") == 1; }));
  ASSERT_TRUE(server_.InjectFault({{"verb", "watch"}, {"raw_body", ""}, {"count", -1}}).ok());
  ASSERT_EQ(*server_.WatchAction("end", "computedomains"), 1);
  ASSERT_TRUE(WaitFor(cache, [&] { return cache.stats().watches >= 2; }));
  auto second = Steady::now();
  ASSERT_TRUE(WaitFor(cache, [&] { return cache.stats().watches >= 5; }));
  // 200 + 400 + 400 ms between them, less the 50 ms of a late notice.
  EXPECT_GE(Steady::now() - second, std::chrono::milliseconds(900));
  EXPECT_EQ(cache.stats().lists, 1u);  // each ended cleanly: resumed, not relisted
}

TEST_F(WatchCacheTest, AnExpireEventMidStreamRelists) {
  WatchCache cache(*client_, DomainOptions());
  cache.Start();
  ASSERT_TRUE(cache.WaitSynced(Steady::now() + std::chrono::seconds(15)));
  ASSERT_TRUE(WaitFor(cache, [&] { return *server_.OpenWatches("computedomains") == 1; }));
  ASSERT_EQ(*server_.WatchAction("expire", "computedomains"), 1);
  ASSERT_TRUE(WaitFor(cache, [&] { return cache.stats().lists == 2; }));
  EXPECT_EQ(cache.stats().relists_after_gone, 1u);
}

TEST_F(WatchCacheTest, BookmarksAdvanceTheResumePoint) {
  ASSERT_TRUE(server_.SetBookmarkInterval(0.05).ok());
  WatchCache cache(*client_, DomainOptions());
  cache.Start();
  ASSERT_TRUE(cache.WaitSynced(Steady::now() + std::chrono::seconds(15)));
  std::string listed = cache.stats().resource_version;
  // Changes to other kinds move the server's resourceVersion; bookmarks
  // carry it to this watch, so a resume after a compaction still works.
  ASSERT_TRUE(server_.LoadObject({{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n1"}}}}).ok());
  ASSERT_TRUE(WaitFor(cache, [&] { return cache.stats().resource_version != listed; }));
  EXPECT_GE(cache.stats().bookmarks, 1u);
  ASSERT_TRUE(server_.CompactWatchHistory().ok());
  ASSERT_EQ(*server_.WatchAction("end", "computedomains"), 1);
  ASSERT_TRUE(server_.LoadObject(Domain("team-a", "cd-1", "uid-1", "Ready")).ok());
  ASSERT_TRUE(WaitFor(cache, [&] { return Status(cache.GetByUid("uid-1")) == "Ready"; }));
  EXPECT_EQ(cache.stats().relists_after_gone, 0u);
  EXPECT_EQ(cache.stats().lists, 1u);
}

TEST_F(WatchCacheTest, MemoryHoldsOnlyTheProjectionOfLiveObjects) {
  auto o = DomainOptions();
  o.project = [](const json& cd) { return json{{"status", cd.value("status", json::object())}}; };
  WatchCache cache(*client_, o);
  cache.Start();
  ASSERT_TRUE(cache.WaitSynced(Steady::now() + std::chrono::seconds(15)));
  for (int i = 0; i < 50; i++) {
    ASSERT_TRUE(server_.LoadObject(Domain("ns", "d" + std::to_string(i), "u" + std::to_string(i), "Ready")).ok());
  }
  ASSERT_TRUE(WaitFor(cache, [&] { return cache.stats().objects == 51; }));
  auto one = cache.GetByUid("u7");
  ASSERT_TRUE(one);
  EXPECT_FALSE(one->contains("spec"));
  EXPECT_EQ((*one)["metadata"]["name"], "d7");
  EXPECT_EQ((*one)["metadata"]["namespace"], "ns");
  for (int i = 0; i < 50; i++) ASSERT_TRUE(server_.DeleteObject("computedomains", "ns", "d" + std::to_string(i)).ok());
  ASSERT_TRUE(WaitFor(cache, [&] { return cache.stats().objects == 1; }));
  EXPECT_EQ(cache.GetByUid("u7"), nullptr);
}

TEST_F(WatchCacheTest, FieldSelectorsApplyToTheListAndTheWatch) {
  ASSERT_TRUE(server_.LoadObject({{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n1"}}}}).ok());
  ASSERT_TRUE(server_.LoadObject({{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n2"}}}}).ok());
  WatchCacheOptions o;
  o.path = "/api/v1/nodes";
  o.field_selector = "metadata.name=n1";
  WatchCache cache(*client_, o);
  cache.Start();
  ASSERT_TRUE(cache.WaitSynced(Steady::now() + std::chrono::seconds(15)));
  EXPECT_TRUE(cache.Get("", "n1"));
  EXPECT_FALSE(cache.Get("", "n2"));
  ASSERT_TRUE(server_
                  .LoadObject({{"apiVersion", "v1"},
                               {"kind", "Node"},
                               {"metadata", {{"name", "n2"}, {"labels", {{"a", "b"}}}}}})
                  .ok());
  ASSERT_TRUE(server_
                  .LoadObject({{"apiVersion", "v1"},
                               {"kind", "Node"},
                               {"metadata", {{"name", "n1"}, {"labels", {{"a", "b"}}}}}})
                  .ok());
  ASSERT_TRUE(WaitFor(cache, [&] {
    auto n = cache.Get("", "n1");
    return n && n->contains("metadata") && (*n)["metadata"].contains("labels");
  }));
  EXPECT_FALSE(cache.Get("", "n2"));
  EXPECT_EQ(cache.stats().events, 1u);
}

TEST_F(WatchCacheTest, ObjectsOfAnotherKindNameOrUidAreRejected) {
  ASSERT_TRUE(server_
                  .LoadObject({{"apiVersion", "v1"},
                               {"kind", "Node"},
                               {"metadata", {{"name", "node-a"}, {"labels", {{"a", "b"}}}}}})
                  .ok());
  WatchCacheOptions o;
  o.path = "/api/v1/nodes";
  o.field_selector = "metadata.name=node-a";
  o.kind = "Node";
  o.initial_backoff = std::chrono::milliseconds(10);
  WatchCache cache(*client_, o);
  cache.Start();
  ASSERT_TRUE(cache.WaitSynced(Steady::now() + std::chrono::seconds(15)));
  ASSERT_TRUE(WaitFor(cache, [&] { return *server_.OpenWatches("nodes") == 1; }));
  const std::string uid = (*cache.Get("", "node-a"))["metadata"]["uid"];
  // The resumed watch answers a Pod of the Node's name, a Node of another
  // name, a Node of the right name with another UID, and a deletion of one.
  ASSERT_TRUE(
      server_
          .InjectFault(
              {{"verb", "watch"},
               {"raw_body",
                "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"node-a\",\"uid\":\"zzz\"}"
                ","
                "\"spec\":{\"containers\":[]}}}\n"
                "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Node\",\"metadata\":{\"name\":\"node-b\",\"uid\":\"b\"}}}\n"
                "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Node\",\"metadata\":{\"name\":\"node-a\",\"uid\":"
                "\"zzz\"}}}\n"
                "{\"type\":\"DELETED\",\"object\":{\"kind\":\"Node\",\"metadata\":{\"name\":\"node-a\",\"uid\":\"zzz\"}"
                "}}\n"
                "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Node\",\"metadata\":{\"name\":\"node-a\"}}}\n"}})
          .ok());
  ASSERT_EQ(*server_.WatchAction("drop", "nodes"), 1);
  ASSERT_TRUE(WaitFor(cache, [&] { return cache.stats().rejected >= 5; }));
  EXPECT_EQ(cache.stats().rejected, 5u);
  EXPECT_EQ(cache.stats().events, 0u);
  auto node = cache.Get("", "node-a");
  ASSERT_TRUE(node);
  EXPECT_EQ((*node)["metadata"]["uid"], uid);
  EXPECT_EQ((*node)["metadata"]["labels"]["a"], "b");
  EXPECT_FALSE(node->contains("spec") && (*node)["spec"].contains("containers"));
  EXPECT_EQ(cache.GetByUid("zzz"), nullptr);
  EXPECT_EQ(cache.Get("", "node-b"), nullptr);
  EXPECT_EQ(cache.List().size(), 1u);
}

}  // namespace
}  // namespace nvdra::kube
