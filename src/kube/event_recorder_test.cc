#include "kube/event_recorder.h"

#include <gtest/gtest.h>

#include "test_apiserver.h"

namespace nvdra::kube {
namespace {

using namespace std::chrono_literals;
using nvdra::testing::TestApiServer;

KubeClientOptions RecorderClientOptions() {
  KubeClientOptions o;
  o.qps = 0;
  o.initial_backoff = std::chrono::milliseconds(1);
  return o;
}

TEST(EventRecorderTest, PostsDedupsAndRateLimits) {
  TestApiServer server;
  ASSERT_TRUE(server.ok()) << server.error();
  auto client = KubeClient::FromConfig(server.Config(), RecorderClientOptions());
  FakeClock clock;
  EventRecorderOptions o;
  o.component = "gpu.nvidia.com";
  o.instance = "node1";
  o.burst = 3;
  o.qps = 1.0 / 60;
  EventRecorder rec(*client, o, clock);
  ObjectReference claim{"resource.k8s.io/v1", "ResourceClaim", "ns", "c1", "uid-1"};
  ASSERT_TRUE(rec.Record(claim, "Warning", "PrepareFailed", "device gpu-0 is held by claim x").ok());
  // The same failure again within the window: not posted.
  EXPECT_EQ(rec.Record(claim, "Warning", "PrepareFailed", "device gpu-0 is held by claim x").code(),
            StatusCode::kUnavailable);
  ObjectReference node{"v1", "Node", "", "node1", "node-uid"};
  ASSERT_TRUE(rec.Record(node, "Warning", "CheckpointQuarantined", "ledger damaged").ok());
  ASSERT_TRUE(rec.Record(claim, "Warning", "PrepareFailed", "another message").ok());
  // Burst of 3 spent: the fourth distinct event is dropped until tokens refill.
  EXPECT_FALSE(rec.Record(claim, "Warning", "Other", "m").ok());
  clock.Advance(60s);
  EXPECT_TRUE(rec.Record(claim, "Warning", "Other", "m").ok());
  EXPECT_EQ(rec.posted(), 4u);
  EXPECT_EQ(rec.suppressed(), 2u);
  // After the dedup window the same event may be posted again.
  clock.Advance(10min);
  EXPECT_TRUE(rec.Record(claim, "Warning", "PrepareFailed", "device gpu-0 is held by claim x").ok());

  auto events = server.Objects("events");
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 5u);
  int in_default = 0;
  for (const auto& e : *events) {
    EXPECT_EQ(e["source"]["host"], "node1");
    EXPECT_EQ(e["reportingComponent"], "gpu.nvidia.com");
    EXPECT_EQ(e["count"], 1);
    if (e["involvedObject"]["kind"] == "Node") {
      EXPECT_EQ(e["metadata"]["namespace"], "default");
      EXPECT_EQ(e["involvedObject"]["uid"], "node-uid");
      ++in_default;
    } else {
      EXPECT_EQ(e["metadata"]["namespace"], "ns");
      EXPECT_EQ(e["involvedObject"]["uid"], "uid-1");
      EXPECT_EQ(e["type"], "Warning");
    }
  }
  EXPECT_EQ(in_default, 1);
}

}  // namespace
}  // namespace nvdra::kube
