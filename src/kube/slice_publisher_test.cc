// SlicePublisher against the test API server: convergence after creates,
// updates, third-party deletes and edits, 409 conflicts and outages.
#include "kube/slice_publisher.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include "util/log.h"

#include <fmt/format.h>

#include "kube/beast_transport.h"
#include "test_apiserver.h"

namespace nvdra::kube {
namespace {

using nlohmann::json;
using nvdra::testing::TestApiServer;
using nvdra::testing::TestApiServerOptions;
using namespace std::chrono_literals;

constexpr const char* kDriver = "gpu.nvidia.com";
constexpr const char* kNode = "node1";

json Node() { return {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", kNode}, {"uid", "node-uid-1"}}}}; }

std::vector<model::PublishedDevice> Devices(int n, const std::string& product = "H100") {
  std::vector<model::PublishedDevice> out;
  for (int i = n - 1; i >= 0; --i) {  // reverse order: the publisher sorts
    model::PublishedDevice d;
    d.name = "gpu-" + std::to_string(i);
    d.sort_key = fmt::format("{:04x}:{:02x}:00.0", i / 256, i % 256);
    d.attributes["productName"] = product;
    d.attributes["index"] = int64_t{i};
    d.capacity["memory"] = "85899345920";
    out.push_back(d);
  }
  return out;
}

KubeClientOptions PublisherClientOptions() {
  KubeClientOptions o;
  o.qps = 0;
  o.initial_backoff = 1ms;
  o.max_attempts = 2;
  o.max_retry_after = 0s;
  return o;
}

class SlicePublisherTest : public ::testing::Test {
 protected:
  void SetUp() override { Start({}); }
  void Start(TestApiServerOptions o) {
    server_ = std::make_unique<TestApiServer>(o);
    ASSERT_TRUE(server_->ok()) << server_->error();
    ASSERT_TRUE(server_->LoadObject(Node()).ok());
    client_ = KubeClient::FromConfig(server_->Config(), PublisherClientOptions());
  }
  json Slices() {
    auto items = server_->Objects("resourceslices");
    EXPECT_TRUE(items.ok());
    return items.ok() ? *items : json::array();
  }
  // Checks the stored pool is complete and consistent; returns its generation.
  int64_t CheckPool(size_t want_slices, size_t want_devices) {
    json slices = Slices();
    EXPECT_EQ(slices.size(), want_slices);
    size_t devices = 0;
    int64_t gen = -1;
    for (const auto& s : slices) {
      EXPECT_EQ(s["spec"]["driver"], kDriver);
      EXPECT_EQ(s["spec"]["nodeName"], kNode);
      EXPECT_EQ(s["spec"]["pool"]["name"], kNode);
      EXPECT_EQ(s["spec"]["pool"]["resourceSliceCount"], want_slices);
      if (gen >= 0) {
        EXPECT_EQ(s["spec"]["pool"]["generation"], gen);
      }
      gen = s["spec"]["pool"]["generation"];
      EXPECT_EQ(s["metadata"]["ownerReferences"][0]["uid"], "node-uid-1");
      EXPECT_EQ(s["metadata"]["ownerReferences"][0]["kind"], "Node");
      devices += s["spec"]["devices"].size();
    }
    EXPECT_EQ(devices, want_devices);
    return gen;
  }
  std::unique_ptr<TestApiServer> server_;
  std::unique_ptr<KubeClient> client_;
};

TEST_F(SlicePublisherTest, NothingPublishedBeforeDiscovery) {
  SlicePublisher pub(*client_, kDriver, kNode);
  ASSERT_TRUE(pub.SyncOnce().ok());
  EXPECT_TRUE(Slices().empty());
  auto reqs = server_->Requests();
  ASSERT_TRUE(reqs.ok());
  EXPECT_TRUE(reqs->empty()) << reqs->dump();
  // After discovery, even an empty inventory is published as a pool.
  pub.Update({});
  ASSERT_TRUE(pub.SyncOnce().ok());
  CheckPool(1, 0);
}

TEST_F(SlicePublisherTest, CreatesSortedChunkedSlicesThenIsQuiet) {
  SlicePublisher pub(*client_, kDriver, kNode);
  pub.Update(Devices(300));
  ASSERT_TRUE(pub.SyncOnce().ok()) << pub.stats().last_error.ToString();
  EXPECT_EQ(CheckPool(3, 300), 1);
  EXPECT_EQ(pub.stats().creates, 3u);
  json before = Slices();
  // Sorted by bus id across slices: slice 0 holds gpu-0..gpu-127.
  for (const auto& s : before) {
    std::string name = s["metadata"]["name"];
    EXPECT_EQ(name.rfind(std::string("0000") + name[4] + "-gpu.nvidia.com-node1-", 0), 0u) << name;
    if (name[4] == '0') {
      EXPECT_EQ(s["spec"]["devices"][0]["name"], "gpu-0");
      EXPECT_EQ(s["spec"]["devices"][127]["name"], "gpu-127");
    }
  }
  // Same inventory again (in another order): no writes at all.
  auto d = Devices(300);
  std::reverse(d.begin(), d.end());
  pub.Update(d);
  ASSERT_TRUE(server_->Requests(true).ok());
  ASSERT_TRUE(pub.SyncOnce().ok());
  EXPECT_EQ(Slices(), before);
  auto reqs = *server_->Requests();
  for (const auto& r : reqs) EXPECT_EQ(r["method"], "GET") << r.dump();
  EXPECT_EQ(pub.stats().creates + pub.stats().updates + pub.stats().deletes, 3u);
}

TEST_F(SlicePublisherTest, InventoryChangeBumpsGenerationAndShrinks) {
  SlicePublisher pub(*client_, kDriver, kNode);
  pub.Update(Devices(200));
  ASSERT_TRUE(pub.SyncOnce().ok());
  EXPECT_EQ(CheckPool(2, 200), 1);
  pub.Update(Devices(200, "H200"));
  ASSERT_TRUE(pub.SyncOnce().ok());
  EXPECT_EQ(CheckPool(2, 200), 2);
  EXPECT_EQ(pub.stats().updates, 2u);
  pub.Update(Devices(100, "H200"));
  ASSERT_TRUE(pub.SyncOnce().ok());
  EXPECT_EQ(CheckPool(1, 100), 3);
  EXPECT_EQ(pub.stats().deletes, 1u);
  EXPECT_EQ(pub.stats().generation, 3);
}

TEST_F(SlicePublisherTest, RepairsThirdPartyDeleteAndEdit) {
  SlicePublisher pub(*client_, kDriver, kNode);
  pub.Update(Devices(200));
  ASSERT_TRUE(pub.SyncOnce().ok());
  json slices = Slices();
  // The kubelet deleted one slice: recreated, same generation (content unchanged).
  ASSERT_TRUE(server_->DeleteObject("resourceslices", "", slices[1]["metadata"]["name"]).ok());
  ASSERT_TRUE(pub.SyncOnce().ok());
  EXPECT_EQ(CheckPool(2, 200), 1);
  EXPECT_EQ(pub.stats().creates, 3u);
  // Someone edited a slice: put back, with a new generation.
  json s = Slices()[0];
  s["spec"]["devices"][0]["attributes"]["productName"] = {{"string", "tampered"}};
  s["apiVersion"] = "resource.k8s.io/v1";
  s["kind"] = "ResourceSlice";
  ASSERT_TRUE(client_
                  ->UpdateJson("/apis/resource.k8s.io/v1/resourceslices/" + s["metadata"]["name"].get<std::string>(), s)
                  .ok());
  ASSERT_TRUE(pub.SyncOnce().ok());
  EXPECT_EQ(CheckPool(2, 200), 2);
  for (const auto& sl : Slices()) {
    for (const auto& d : sl["spec"]["devices"]) EXPECT_EQ(d["attributes"]["productName"]["string"], "H100");
  }
  // A foreign pool of ours on this node (an older plugin's) is removed.
  json stray = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceSlice"},
                {"metadata", {{"name", "stray"}}},
                {"spec",
                 {{"driver", kDriver},
                  {"nodeName", kNode},
                  {"pool", {{"name", "old"}, {"generation", 9}, {"resourceSliceCount", 1}}},
                  {"devices", json::array()}}}};
  json other_driver = stray;
  other_driver["metadata"]["name"] = "other";
  other_driver["spec"]["driver"] = "compute-domain.nvidia.com";
  ASSERT_TRUE(server_->LoadObject(stray).ok());
  ASSERT_TRUE(server_->LoadObject(other_driver).ok());
  ASSERT_TRUE(pub.SyncOnce().ok());
  EXPECT_EQ(Slices().size(), 3u);  // ours (2) plus the other driver's, untouched
  EXPECT_EQ(pub.stats().generation, 2);
}

// Forwards to a real transport; runs a hook before the first PUT, so another
// writer can change the object in between the publisher's LIST and its PUT.
class RacingTransport : public HttpTransport {
 public:
  RacingTransport(KubeConfig c, std::function<void()> hook) : inner_(std::move(c)), hook_(std::move(hook)) {}
  Result<HttpResponse> RoundTrip(const HttpRequest& r) override {
    if (r.method == "PUT" && hook_) {
      auto h = std::move(hook_);
      hook_ = nullptr;
      h();
    }
    return inner_.RoundTrip(r);
  }

 private:
  BeastTransport inner_;
  std::function<void()> hook_;
};

TEST_F(SlicePublisherTest, ConvergesAfterRealConflict) {
  {
    SlicePublisher first(*client_, kDriver, kNode);
    first.Update(Devices(10));
    ASSERT_TRUE(first.SyncOnce().ok());
  }
  auto other = KubeClient::FromConfig(server_->Config(), PublisherClientOptions());
  KubeClient racing(
      std::make_unique<RacingTransport>(server_->Config(),
                                        [&] {
                                          json s = Slices()[0];
                                          s["apiVersion"] = "resource.k8s.io/v1";
                                          s["kind"] = "ResourceSlice";
                                          s["metadata"]["labels"] = {{"touched", "yes"}};
                                          ASSERT_TRUE(other
                                                          ->UpdateJson("/apis/resource.k8s.io/v1/resourceslices/" +
                                                                           s["metadata"]["name"].get<std::string>(),
                                                                       s)
                                                          .ok());
                                        }),
      PublisherClientOptions());
  SlicePublisher pub(racing, kDriver, kNode);
  pub.Update(Devices(10, "H200"));
  Status s = pub.SyncOnce();
  EXPECT_EQ(s.code(), StatusCode::kConflict) << s.ToString();
  ASSERT_TRUE(pub.SyncOnce().ok());
  CheckPool(1, 10);
  EXPECT_EQ(Slices()[0]["spec"]["devices"][0]["attributes"]["productName"]["string"], "H200");
}

TEST_F(SlicePublisherTest, InjectedConflictAndOutageThenConverges) {
  SlicePublisher pub(*client_, kDriver, kNode);
  pub.Update(Devices(10));
  ASSERT_TRUE(server_->InjectFault({{"drop", true}, {"count", -1}}).ok());
  EXPECT_EQ(pub.SyncOnce().code(), StatusCode::kUnavailable);
  ASSERT_TRUE(server_->ClearFaults().ok());
  ASSERT_TRUE(server_->InjectFault({{"status", 409}, {"method", "POST"}, {"count", 1}}).ok());
  EXPECT_EQ(pub.SyncOnce().code(), StatusCode::kConflict);
  ASSERT_TRUE(pub.SyncOnce().ok());
  CheckPool(1, 10);
  EXPECT_EQ(pub.stats().failed_syncs, 2u);
}

// While the API server is down, a sync asks it once whether it answers and
// fails at once: the client's backoff between retries would otherwise delay
// the publication for seconds after the server is back.
TEST_F(SlicePublisherTest, DuringAnOutageEachSyncMakesOneRequestWithoutRetries) {
  auto client = KubeClient::FromConfig(server_->Config(), [] {
    KubeClientOptions o = PublisherClientOptions();
    o.max_attempts = 5;
    return o;
  }());
  SlicePublisher pub(*client, kDriver, kNode);
  pub.Update(Devices(2));
  ASSERT_TRUE(server_->InjectFault({{"status", 503}, {"count", -1}}).ok());
  const uint64_t before = client->stats().requests;
  Status down = pub.SyncOnce();
  EXPECT_EQ(down.code(), StatusCode::kUnavailable) << down.ToString();
  EXPECT_NE(down.message().find("the API server is not serving requests: GET /version:"), std::string::npos)
      << down.ToString();
  EXPECT_EQ(client->stats().requests - before, 1u);
  ASSERT_TRUE(server_->ClearFaults().ok());
  ASSERT_TRUE(pub.SyncOnce().ok()) << pub.stats().last_error.ToString();
  CheckPool(1, 2);
  // Published: the next sync goes straight to its work (and the client's
  // retries ride out a short blip).
  const uint64_t published = client->stats().requests;
  ASSERT_TRUE(pub.SyncOnce().ok());
  auto reqs = server_->Requests();
  ASSERT_TRUE(reqs.ok());
  int version_gets = 0;
  for (const auto& r : *reqs) version_gets += r["path"] == "/version";
  EXPECT_EQ(version_gets, 2);  // the failed check and the one that passed
  EXPECT_GT(client->stats().requests, published);
}

TEST_F(SlicePublisherTest, AFailingSyncWarnsOnceUntilItFailsDifferentlyOrSucceeds) {
  std::ostringstream out;
  InitLoggingTo(std::make_shared<spdlog::sinks::ostream_sink_mt>(out), 0);
  SlicePublisher pub(*client_, kDriver, kNode);
  pub.Update(Devices(2));
  ASSERT_TRUE(
      server_
          ->InjectFault({{"status", 403}, {"method", "POST"}, {"path_prefix", "/apis/resource.k8s.io/"}, {"count", 3}})
          .ok());
  for (int i = 0; i < 3; i++) EXPECT_FALSE(pub.SyncOnce().ok());
  ASSERT_TRUE(pub.SyncOnce().ok());
  ASSERT_TRUE(server_->ClearFaults().ok());
  ASSERT_TRUE(server_->InjectFault({{"status", 403}, {"method", "PUT"}, {"count", 1}}).ok());
  ASSERT_TRUE(server_
                  ->InjectFault({{"status", 403},
                                 {"method", "GET"},
                                 {"path_prefix", "/apis/resource.k8s.io/v1/resourceslices"},
                                 {"count", 1}})
                  .ok());
  EXPECT_FALSE(pub.SyncOnce().ok());
  InitLogging(0);
  std::istringstream in(out.str());
  int warnings = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find("ResourceSlice sync for driver") == std::string::npos) continue;
    EXPECT_EQ(line[0], 'W') << line;
    ++warnings;
  }
  // Three failures alike: one warning; after a success, the next failure warns again.
  EXPECT_EQ(warnings, 2) << out.str();
}

// Keeps every sync result it is told about.
class RecordingObserver : public SlicePublisherObserver {
 public:
  void OnSliceSync(const SliceSyncResult& result) override { results.push_back(result); }
  std::vector<SliceSyncResult> results;
};

TEST_F(SlicePublisherTest, ObserverHearsEverySyncAndItsOutcome) {
  RecordingObserver observer;
  SlicePublisherOptions o;
  o.observer = &observer;
  SlicePublisher pub(*client_, kDriver, kNode, o);
  ASSERT_TRUE(pub.SyncOnce().ok());
  pub.Update(Devices(3));
  ASSERT_TRUE(server_->InjectFault({{"status", 409}, {"method", "POST"}, {"count", 1}}).ok());
  EXPECT_EQ(pub.SyncOnce().code(), StatusCode::kConflict);
  ASSERT_TRUE(pub.SyncOnce().ok());
  ASSERT_TRUE(pub.SyncOnce().ok());
  ASSERT_EQ(observer.results.size(), 4u);
  const auto& before = observer.results[0];
  EXPECT_TRUE(before.status.ok());
  EXPECT_FALSE(before.published);
  const auto& conflict = observer.results[1];
  EXPECT_EQ(conflict.status.code(), StatusCode::kConflict);
  EXPECT_TRUE(conflict.published);
  EXPECT_EQ(conflict.creates, 0u);
  const auto& created = observer.results[2];
  EXPECT_TRUE(created.status.ok());
  EXPECT_EQ(created.creates, 1u);
  EXPECT_EQ(created.generation, 1);
  EXPECT_EQ(created.slices, 1u);
  const auto& quiet = observer.results[3];
  EXPECT_TRUE(quiet.status.ok());
  EXPECT_EQ(quiet.creates + quiet.updates + quiet.deletes, 0u);
  EXPECT_EQ(quiet.generation, 1);
  EXPECT_EQ(pub.stats().failed_syncs, 1u);
}

TEST_F(SlicePublisherTest, PermanentFailureBecomesNodeEvent) {
  FakeClock clock;
  EventRecorder events(*client_, {.component = kDriver, .instance = kNode}, clock);
  SlicePublisherOptions o;
  o.events = &events;
  SlicePublisher pub(*client_, kDriver, kNode, o);
  pub.Update(Devices(2));
  ASSERT_TRUE(
      server_
          ->InjectFault({{"status", 403}, {"method", "POST"}, {"path_prefix", "/apis/resource.k8s.io/"}, {"count", 2}})
          .ok());
  EXPECT_EQ(pub.SyncOnce().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(pub.SyncOnce().code(), StatusCode::kPermissionDenied);
  auto evs = server_->Objects("events");
  ASSERT_TRUE(evs.ok());
  ASSERT_EQ(evs->size(), 1u);  // the repeat is deduplicated
  EXPECT_EQ((*evs)[0]["reason"], "ResourceSlicePublishFailed");
  EXPECT_EQ((*evs)[0]["involvedObject"]["uid"], "node-uid-1");
  ASSERT_TRUE(pub.SyncOnce().ok());
  CheckPool(1, 2);
  // Transient failures (outage) are not events.
  ASSERT_TRUE(server_->InjectFault({{"status", 500}, {"count", 4}}).ok());
  EXPECT_FALSE(pub.SyncOnce().ok());
  EXPECT_EQ(server_->Objects("events")->size(), 1u);
}

TEST_F(SlicePublisherTest, NodeLookedUpOnceAndRequired) {
  ASSERT_TRUE(server_->DeleteObject("nodes", "", kNode).ok());
  SlicePublisher pub(*client_, kDriver, kNode);
  pub.Update(Devices(1));
  EXPECT_EQ(pub.SyncOnce().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Slices().empty());
  ASSERT_TRUE(server_->LoadObject(Node()).ok());
  ASSERT_TRUE(pub.SyncOnce().ok());
  ASSERT_TRUE(pub.SyncOnce().ok());
  int node_gets = 0;
  auto reqs = server_->Requests();
  ASSERT_TRUE(reqs.ok());
  for (const auto& r : *reqs) node_gets += r["path"] == "/api/v1/nodes/node1";
  EXPECT_EQ(node_gets, 2);  // the failed lookup and the one that worked
}

TEST_F(SlicePublisherTest, BackgroundLoopRepublishesWithinOnePeriod) {
  SlicePublisherOptions o;
  o.resync_period = 100ms;
  o.retry_period = 20ms;
  SlicePublisher pub(*client_, kDriver, kNode, o);
  pub.Start();
  pub.Update(Devices(5));
  ASSERT_TRUE(pub.WaitForSyncs(2, 10s));
  // Wait for a sync that saw the inventory.
  for (uint64_t n = 2; pub.stats().slices == 0 && n < 50; ++n) ASSERT_TRUE(pub.WaitForSyncs(n + 1, 10s));
  CheckPool(1, 5);
  // The kubelet wipes the node's slices; the next periodic sync restores them.
  auto name = Slices()[0]["metadata"]["name"].get<std::string>();
  ASSERT_TRUE(server_->DeleteObject("resourceslices", "", name).ok());
  uint64_t n = pub.stats().syncs;
  ASSERT_TRUE(pub.WaitForSyncs(n + 1, 10s));
  pub.Stop();
  CheckPool(1, 5);
  EXPECT_NE(Slices()[0]["metadata"]["name"], name);
}

// A watching publisher whose resync is an hour away: within a test, every
// sync after the first ones is one the watch asked for.
SlicePublisherOptions Watching() {
  SlicePublisherOptions o;
  o.watch = true;
  o.resync_period = std::chrono::hours(1);
  o.retry_period = 20ms;
  return o;
}

// Every sync the watch asked for has run.
bool Served(const SlicePublisherStats& s) { return s.syncs > s.watch_trigger_after; }

TEST_F(SlicePublisherTest, AWatchedPoolIsRepairedWhenSomeoneElseDeletesEditsOrAddsASlice) {
  SlicePublisher pub(*client_, kDriver, kNode, Watching());
  pub.Start();
  pub.Update(Devices(200));
  // The first sync publishes and starts the watch; the watch's LIST asks for
  // one more (a list may stand for changes no event told of).
  ASSERT_TRUE(pub.WaitForStats([](const auto& s) { return s.slices == 2 && s.watch_triggers >= 1 && Served(s); }, 10s));
  EXPECT_EQ(CheckPool(2, 200), 1);

  // The kubelet deletes a slice: recreated, same generation.
  auto before = pub.stats();
  ASSERT_TRUE(server_->DeleteObject("resourceslices", "", Slices()[1]["metadata"]["name"]).ok());
  ASSERT_TRUE(pub.WaitForStats([&](const auto& s) { return s.creates > before.creates && Served(s); }, 10s));
  EXPECT_EQ(CheckPool(2, 200), 1);
  EXPECT_GT(pub.stats().watch_triggers, before.watch_triggers);

  // Someone edits a slice: put back under a new generation.
  before = pub.stats();
  json edited = Slices()[0];
  edited["spec"]["devices"][0]["attributes"]["productName"] = {{"string", "tampered"}};
  edited["apiVersion"] = "resource.k8s.io/v1";
  edited["kind"] = "ResourceSlice";
  ASSERT_TRUE(client_
                  ->UpdateJson("/apis/resource.k8s.io/v1/resourceslices/" +
                                   edited["metadata"]["name"].get<std::string>(),
                               edited)
                  .ok());
  ASSERT_TRUE(pub.WaitForStats([&](const auto& s) { return s.generation == 2 && Served(s); }, 10s));
  EXPECT_EQ(CheckPool(2, 200), 2);
  for (const auto& sl : Slices()) {
    for (const auto& d : sl["spec"]["devices"]) EXPECT_EQ(d["attributes"]["productName"]["string"], "H100");
  }

  // A stray pool of this driver on this node appears: deleted.
  before = pub.stats();
  json stray = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceSlice"},
                {"metadata", {{"name", "stray"}}},
                {"spec",
                 {{"driver", kDriver},
                  {"nodeName", kNode},
                  {"pool", {{"name", "old"}, {"generation", 9}, {"resourceSliceCount", 1}}},
                  {"devices", json::array()}}}};
  ASSERT_TRUE(server_->LoadObject(stray).ok());
  ASSERT_TRUE(pub.WaitForStats([&](const auto& s) { return s.deletes > before.deletes && Served(s); }, 10s));
  EXPECT_EQ(CheckPool(2, 200), 2);
  pub.Stop();
}

TEST_F(SlicePublisherTest, AWatchedPoolsOwnWritesAskForNoFurtherSyncOrList) {
  SlicePublisher pub(*client_, kDriver, kNode, Watching());
  pub.Start();
  pub.Update(Devices(5));
  ASSERT_TRUE(pub.WaitForStats([](const auto& s) { return s.slices == 1 && s.watch_triggers >= 1 && Served(s); }, 10s));
  ASSERT_TRUE(server_->Counts(/*clear=*/true).ok());
  const auto before = pub.stats();

  // A bigger inventory: the pool's one slice is updated and a second created,
  // under a new generation; the watch then tells of both writes.
  pub.Update(Devices(200));
  ASSERT_TRUE(pub.WaitForStats([&](const auto& s) { return s.syncs > before.syncs && s.slices == 2; }, 10s));
  auto after = pub.stats();
  const uint64_t writes = (after.creates - before.creates) + (after.updates - before.updates) +
                          (after.deletes - before.deletes);
  EXPECT_EQ(writes, 2u);
  ASSERT_TRUE(pub.WaitForStats([&](const auto& s) { return s.watch_events >= before.watch_events + writes; }, 10s));
  after = pub.stats();
  EXPECT_EQ(after.watch_triggers, before.watch_triggers);
  EXPECT_EQ(after.syncs, before.syncs + 1);
  EXPECT_EQ(CheckPool(2, 200), 2);
  // One LIST, by the sync the new inventory asked for.
  auto lists = server_->Count("list", "resourceslices");
  ASSERT_TRUE(lists.ok());
  EXPECT_EQ(*lists, 1);
  pub.Stop();
}

TEST(SlicePublisherVersionTest, PublishesV1beta1ShapeWhenOnlyV1beta1Served) {
  TestApiServerOptions o;
  o.versions = "v1beta1";
  TestApiServer server(o);
  ASSERT_TRUE(server.ok()) << server.error();
  ASSERT_TRUE(server.LoadObject(Node()).ok());
  auto client = KubeClient::FromConfig(server.Config(), PublisherClientOptions());
  SlicePublisher pub(*client, kDriver, kNode);
  pub.Update(Devices(3));
  ASSERT_TRUE(pub.SyncOnce().ok()) << pub.stats().last_error.ToString();
  auto got = client->ListJson("/apis/resource.k8s.io/v1beta1/resourceslices");
  ASSERT_TRUE(got.ok());
  ASSERT_EQ((*got)["items"].size(), 1u);
  EXPECT_EQ((*got)["items"][0]["spec"]["devices"][0]["basic"]["attributes"]["productName"]["string"], "H100");
  // Quiet on resync: the v1beta1 shape compares equal.
  ASSERT_TRUE(pub.SyncOnce().ok());
  EXPECT_EQ(pub.stats().updates + pub.stats().creates, 1u);
  // The cluster is upgraded to v1: the publisher follows.
  ASSERT_TRUE(server.SetVersions({"v1"}).ok());
  EXPECT_FALSE(pub.SyncOnce().ok());
  ASSERT_TRUE(pub.SyncOnce().ok()) << pub.stats().last_error.ToString();
  auto v1 = client->ListJson("/apis/resource.k8s.io/v1/resourceslices");
  ASSERT_TRUE(v1.ok());
  EXPECT_EQ((*v1)["items"].size(), 1u);
  EXPECT_EQ(pub.stats().updates + pub.stats().creates, 1u);  // the stored object is the same
}

}  // namespace
}  // namespace nvdra::kube
