// NodeLabelManager against the test API server: the label set by the first
// channel claim of a domain, refused for another domain, removed by the last
// claim only while it names that domain, and repaired by Repair.
#include "computedomain/node_label_manager.h"

#include <gtest/gtest.h>

#include "computedomain/compute_domain_checkpoint_codec.h"
#include "computedomain/compute_domain_kind.h"
#include "computedomain/testdata/upstream_checkpoint.h"
#include "driver/ledger_claims_view.h"
#include "kube/node_labels.h"
#include "ledger/claim_ledger.h"
#include "test_apiserver.h"
#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::computedomain {
namespace {

using nlohmann::json;
using nvdra::testing::TestApiServer;
using Steady = std::chrono::steady_clock;

kube::KubeClientOptions LabelClientOptions() {
  kube::KubeClientOptions o;
  o.qps = 0;
  o.initial_backoff = std::chrono::milliseconds(1);
  o.max_attempts = 2;
  o.max_retry_after = std::chrono::seconds(0);
  return o;
}

class NodeLabelManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.ok()) << server_.error();
    ASSERT_TRUE(server_.LoadObject({{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n1"}}}}).ok());
    client_ = kube::KubeClient::FromConfig(server_.Config(), LabelClientOptions());
  }
  std::optional<std::string> Label() {
    auto nodes = server_.Objects("nodes");
    return kube::NodeLabel((*nodes)[0], kComputeDomainLabel);
  }
  TestApiServer server_;
  std::unique_ptr<kube::KubeClient> client_;
};

TEST_F(NodeLabelManagerTest, ReferenceCountedByClaimAndRefusedForAnotherDomain) {
  NodeLabelManager m(*client_, "n1");
  ASSERT_TRUE(m.Acquire("d1", "c1").ok());
  EXPECT_EQ(Label(), "d1");
  ASSERT_TRUE(m.Acquire("d1", "c2").ok());
  Status other = m.Acquire("d2", "c3");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.code(), StatusCode::kConflict);
  EXPECT_NE(other.message().find(kLabelForOtherDomain), std::string::npos) << other.message();
  m.Release("d1", "c1");
  EXPECT_EQ(Label(), "d1");  // c2 still holds it
  m.Release("d1", "c2");
  EXPECT_EQ(Label(), std::nullopt);
  ASSERT_TRUE(m.Acquire("d2", "c3").ok());
  EXPECT_EQ(Label(), "d2");
}

TEST_F(NodeLabelManagerTest, ALabelOfAnotherDomainOnTheNodeIsUpstreamsError) {
  json node = (*server_.Objects("nodes"))[0];
  node["metadata"]["labels"] = {{kComputeDomainLabel, "someone-else"}};
  ASSERT_TRUE(client_->UpdateJson("/api/v1/nodes/n1", node).ok());
  NodeLabelManager m(*client_, "n1");
  Status s = m.Acquire("d1", "c1");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("error adding node label: label already exists for a different ComputeDomain"),
            std::string::npos)
      << s.message();
  // Release of a domain never removes another domain's label.
  m.Release("d1", "c1");
  EXPECT_EQ(Label(), "someone-else");
}

TEST_F(NodeLabelManagerTest, RemovalThatFailedIsRetriedByRepair) {
  NodeLabelManager m(*client_, "n1");
  ASSERT_TRUE(m.Acquire("d1", "c1").ok());
  ASSERT_TRUE(server_.InjectFault({{"status", 503}, {"path_prefix", "/api/v1/nodes"}, {"count", -1}}).ok());
  m.Release("d1", "c1");  // never fails: Unprepare must not depend on the API server
  ASSERT_TRUE(server_.ClearFaults().ok());
  EXPECT_EQ(Label(), "d1");
  ASSERT_TRUE(m.Repair().ok());
  EXPECT_EQ(Label(), std::nullopt);
}

TEST_F(NodeLabelManagerTest, OnAnIdleNodeWithoutANodeWatchRepairReadsTheNodeOnlyUntilItSawTheLabelAbsent) {
  NodeLabelManager m(*client_, "n1");
  ASSERT_TRUE(m.Repair().ok());
  EXPECT_EQ(m.api_requests(), 1u);  // one GET: is a label left over?
  ASSERT_TRUE(m.Repair().ok());
  ASSERT_TRUE(m.Repair().ok());
  EXPECT_EQ(m.api_requests(), 1u);
  EXPECT_EQ(*server_.Count("get", "nodes"), 1);
  // A claim comes and goes: its label is written and removed, and the idle
  // passes after it read nothing, since the removal saw the result.
  ASSERT_TRUE(m.Acquire("d1", "c1").ok());
  m.Confirm("d1", "c1");
  EXPECT_EQ(Label(), "d1");
  m.Release("d1", "c1");
  EXPECT_EQ(Label(), std::nullopt);
  const uint64_t after_claim = m.api_requests();
  ASSERT_TRUE(m.Repair().ok());
  EXPECT_EQ(m.api_requests(), after_claim);
  // A removal that failed leaves the label unknown: Repair reads and fixes.
  ASSERT_TRUE(m.Acquire("d1", "c2").ok());
  ASSERT_TRUE(server_.InjectFault({{"status", 503}, {"path_prefix", "/api/v1/nodes"}, {"count", -1}}).ok());
  m.Release("d1", "c2");
  ASSERT_TRUE(server_.ClearFaults().ok());
  EXPECT_EQ(Label(), "d1");
  ASSERT_TRUE(m.Repair().ok());
  EXPECT_EQ(Label(), std::nullopt);
  const uint64_t after_repair = m.api_requests();
  ASSERT_TRUE(m.Repair().ok());
  EXPECT_EQ(m.api_requests(), after_repair);
}

TEST_F(NodeLabelManagerTest, RepairPutsBackALabelRemovedWhileAClaimHoldsIt) {
  NodeLabelManager first(*client_, "n1");
  ASSERT_TRUE(first.Acquire("d1", "c1").ok());
  // A restarted plugin adopts the claim from its ledger without API calls.
  NodeLabelManager m(*client_, "n1");
  m.Adopt("d1", "c1");
  EXPECT_EQ(m.api_requests(), 0u);
  json node = (*server_.Objects("nodes"))[0];
  node["metadata"]["labels"].erase(kComputeDomainLabel);
  ASSERT_TRUE(client_->UpdateJson("/api/v1/nodes/n1", node).ok());
  ASSERT_TRUE(m.Repair().ok());
  EXPECT_EQ(Label(), "d1");
  ASSERT_TRUE(m.Repair().ok());  // nothing to do
  EXPECT_EQ(Label(), "d1");
}

TEST_F(NodeLabelManagerTest, WithAWatchedNodeASetLabelCostsNothingAndAMissingOneOneWrite) {
  kube::WatchCacheOptions o;
  o.path = "/api/v1/nodes";
  o.field_selector = "metadata.name=n1";
  kube::WatchCache node(*client_, o);
  node.Start();
  ASSERT_TRUE(node.WaitSynced(Steady::now() + std::chrono::seconds(15)));
  NodeLabelManager m(*client_, "n1", &node);
  ASSERT_TRUE(server_.Counts(true).ok());
  ASSERT_TRUE(m.Acquire("d1", "c1").ok());
  auto counts = *server_.Counts(true);
  EXPECT_EQ(counts.value("patch", json::object()).value("nodes", 0), 1);
  EXPECT_EQ(counts.value("get", json::object()).value("nodes", 0), 0);
  // Once the watch shows the label, it costs no call.
  auto deadline = Steady::now() + std::chrono::seconds(15);
  uint64_t seen = node.notifier().version();
  while (kube::NodeLabel(*node.Get("", "n1"), kComputeDomainLabel) != "d1" && Steady::now() < deadline) {
    seen = node.notifier().WaitForChange(seen, deadline);
  }
  // A second claim of the domain relies on the first one's label.
  ASSERT_TRUE(m.Acquire("d1", "c2").ok());
  // So does a restarted plugin whose watch shows the label.
  NodeLabelManager restarted(*client_, "n1", &node);
  ASSERT_TRUE(restarted.Acquire("d1", "c3").ok());
  counts = *server_.Counts(true);
  EXPECT_EQ(counts.value("patch", json::object()).value("nodes", 0), 0);
  EXPECT_EQ(counts.value("get", json::object()).value("nodes", 0), 0);
}

TEST_F(NodeLabelManagerTest, ANodeWatchThatLagsBehindTheLabelsOwnWritesDecidesNothing) {
  ASSERT_TRUE(server_
                  .LoadObject({{"apiVersion", "v1"},
                               {"kind", "Node"},
                               {"metadata", {{"name", "n1"}, {"labels", {{kComputeDomainLabel, "d1"}}}}}})
                  .ok());
  kube::WatchCacheOptions o;
  o.path = "/api/v1/nodes";
  o.field_selector = "metadata.name=n1";
  o.initial_backoff = std::chrono::milliseconds(10);
  o.max_backoff = std::chrono::milliseconds(50);
  kube::WatchCache node(*client_, o);
  node.Start();
  ASSERT_TRUE(node.WaitSynced(Steady::now() + std::chrono::seconds(15)));
  // The watch breaks and cannot resume: its copy (labelled d1) stays.
  ASSERT_TRUE(
      server_.InjectFault({{"verb", "watch"}, {"path_prefix", "/api/v1/nodes"}, {"status", 500}, {"count", -1}}).ok());
  ASSERT_TRUE(server_.WatchAction("drop", "nodes").ok());
  ASSERT_TRUE(server_.OpenWatchesReach("nodes", 0));
  ASSERT_TRUE(node.synced());
  NodeLabelManager m(*client_, "n1", &node);
  m.Adopt("d1", "c1");
  m.Release("d1", "c1");
  EXPECT_EQ(Label(), std::nullopt);
  // The copy still shows d1: the next claim of d1 writes the label again.
  ASSERT_TRUE(m.Acquire("d1", "c2").ok());
  EXPECT_EQ(Label(), "d1");
  // And its release removes it again.
  m.Release("d1", "c2");
  EXPECT_EQ(Label(), std::nullopt);
  EXPECT_EQ(kube::NodeLabel(*node.Get("", "n1"), kComputeDomainLabel), "d1");
  node.Stop();
}

TEST_F(NodeLabelManagerTest, APendingHolderThatNeverCompletesExpires) {
  FakeClock clock;
  NodeLabelManager m(*client_, "n1", nullptr, std::chrono::seconds(60), clock);
  ASSERT_TRUE(m.Acquire("d1", "c1").ok());  // Prepare attempt, not completed
  clock.Advance(std::chrono::seconds(30));
  ASSERT_TRUE(m.Repair().ok());
  EXPECT_EQ(Label(), "d1");  // the kubelet is still retrying: keep it
  EXPECT_FALSE(m.Acquire("d2", "c2").ok());
  clock.Advance(std::chrono::seconds(61));
  ASSERT_TRUE(m.Repair().ok());
  EXPECT_EQ(Label(), std::nullopt);
  // A confirmed holder never expires.
  ASSERT_TRUE(m.Acquire("d2", "c2").ok());
  m.Confirm("d2", "c2");
  clock.Advance(std::chrono::hours(5));
  ASSERT_TRUE(m.Repair().ok());
  EXPECT_EQ(Label(), "d2");
}

class NoDomains final : public ComputeDomainSource {
 public:
  Result<ComputeDomainInfo> Get(const std::string& uid) override { return NotFound("ComputeDomain not found: " + uid); }
};

// The upgrade from the Go driver: its channel claim, imported from its
// checkpoint and adopted at start as the plugin does, keeps the label the Go
// driver set (the domain's IMEX daemon stays on the node while the workload
// runs), and its Unprepare takes it away.
TEST_F(NodeLabelManagerTest, AChannelClaimImportedFromTheGoDriverKeepsTheLabelThroughRepair) {
  json node = (*server_.Objects("nodes"))[0];
  node["metadata"]["labels"] = {{kComputeDomainLabel, "cd-1"}};
  ASSERT_TRUE(client_->UpdateJson("/api/v1/nodes/n1", node).ok());
  nvdra::testing::TempDir dir{"nvdra-cd-import"};
  ASSERT_TRUE(WriteFileAtomically(JoinPath(dir.path(), ledger::kLegacyCheckpointFileName),
                                  testing::UpstreamCdCheckpoint())
                  .ok());
  const ComputeDomainCheckpointCodec codec;
  ledger::LedgerOptions lo;
  lo.dir = dir.path();
  lo.boot_id = "boot";
  lo.codec = &codec;
  auto ledger = ledger::ClaimLedger::Open(lo);
  ASSERT_TRUE(ledger.ok()) << ledger.status().ToString();
  ASSERT_EQ((*ledger)->report().imported_legacy_claims, 2u) << (*ledger)->report().Summary();

  NodeLabelManager m(*client_, "n1");
  NoDomains domains;
  ComputeDomainKind kind({},
                         ComputeDomainEdits(devices::ContainerSources{
                             devices::DeviceNodes(devices::DriverRoot("/", "/"), "", ""), nullptr}),
                         domains, &m);
  auto entries = (*ledger)->List();
  ASSERT_TRUE(entries.ok());
  for (const auto& e : *entries) kind.Adopt(e.uid, e.undo);
  ASSERT_TRUE(m.Repair().ok());
  EXPECT_EQ(Label(), "cd-1") << "the imported claim still holds the label";

  auto channel = (*ledger)->Get(testing::kUpstreamChannelClaimUid);
  ASSERT_TRUE(channel.ok() && channel->has_value());
  ASSERT_TRUE(kind.Unprepare(testing::kUpstreamChannelClaimUid, (*channel)->undo).ok());
  EXPECT_EQ(Label(), std::nullopt) << "the last channel claim of the domain takes it away";
}

// A channel claim rebuilt from its CDI spec (the ledger was lost) names no
// domain: Repair keeps whatever label the node has until it is unprepared.
TEST_F(NodeLabelManagerTest, AChannelClaimRebuiltWithoutItsDomainKeepsTheLabelUntilItsUnprepare) {
  json node = (*server_.Objects("nodes"))[0];
  node["metadata"]["labels"] = {{kComputeDomainLabel, "cd-1"}};
  ASSERT_TRUE(client_->UpdateJson("/api/v1/nodes/n1", node).ok());
  NodeLabelManager m(*client_, "n1");
  NoDomains domains;
  ComputeDomainKind kind({},
                         ComputeDomainEdits(devices::ContainerSources{
                             devices::DeviceNodes(devices::DriverRoot("/", "/"), "", ""), nullptr}),
                         domains, &m);
  kind.Adopt("uid-rebuilt", nullptr, {"channel-3"});
  kind.Adopt("uid-daemon", nullptr, {"daemon"});
  ASSERT_TRUE(m.Repair().ok());
  EXPECT_EQ(Label(), "cd-1") << "the rebuilt channel claim may be that domain's";
  ASSERT_TRUE(kind.Unprepare("uid-rebuilt", nullptr).ok());
  ASSERT_TRUE(m.Repair().ok());
  EXPECT_EQ(Label(), std::nullopt) << "once it is unprepared, no claim holds the label";
}

// A rolling update: two plugin instances on one node share the ledger, and a
// channel claim prepared through the new one is unknown to the old one's
// holders. Label ownership follows the ledger: the old instance's Repair
// neither removes the label nor leaves it missing, and an Unprepare through
// either instance removes it only when no channel claim of the domain is
// left in the ledger.
TEST_F(NodeLabelManagerTest, DuringARollingUpdateTheLabelFollowsTheSharedLedgerNotTheInstance) {
  nvdra::testing::TempDir dir{"nvdra-cd-rolling"};
  const ComputeDomainCheckpointCodec codec;
  ledger::LedgerOptions lo;
  lo.dir = dir.path();
  lo.boot_id = "boot";
  lo.codec = &codec;
  auto old_ledger = ledger::ClaimLedger::Open(lo);
  auto new_ledger = ledger::ClaimLedger::Open(lo);
  ASSERT_TRUE(old_ledger.ok() && new_ledger.ok());
  auto shared = [](ledger::ClaimLedger* l) {
    return [view = std::make_shared<driver::LedgerClaimsView>(*l)]() -> Result<LabelHolders> {
      NVDRA_ASSIGN_OR_RETURN(auto held, view->HeldClaims());
      return ComputeDomainKind::LabelHoldersOf(held);
    };
  };
  NodeLabelManager old_instance(*client_, "n1");
  NodeLabelManager new_instance(*client_, "n1");
  old_instance.SetSharedHolders(shared(old_ledger->get()));
  new_instance.SetSharedHolders(shared(new_ledger->get()));

  auto begin = [&](ledger::ClaimLedger& l, const std::string& uid, int channel) {
    ComputeDomainUndo undo;
    undo.domain_id = "cd-1";
    undo.channels.push_back({"channel-" + std::to_string(channel), channel});
    ledger::BeginPrepareRequest req;
    req.uid = uid;
    req.ns = "default";
    req.name = "claim-" + uid;
    req.allocation.push_back(
        {.request = "channel", .driver = kDriverName, .pool = "n1", .device = "channel-" + std::to_string(channel)});
    req.undo = EncodeComputeDomainUndo(undo);
    auto r = l.BeginPrepare(req);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  };
  // The new instance prepares a channel claim: ledger entry, then the label.
  begin(**new_ledger, "uid-new", 0);
  ASSERT_TRUE(new_instance.Acquire("cd-1", "uid-new").ok());
  new_instance.Confirm("cd-1", "uid-new");
  ASSERT_EQ(Label(), "cd-1");

  // The old instance's maintenance passes keep it, and put it back when
  // someone removed it.
  for (int pass = 0; pass < 3; ++pass) {
    ASSERT_TRUE(old_instance.Repair().ok());
    EXPECT_EQ(Label(), "cd-1") << "pass " << pass << ": the old instance removed the new instance's label";
  }
  json node = (*server_.Objects("nodes"))[0];
  node["metadata"]["labels"] = json::object();
  ASSERT_TRUE(client_->UpdateJson("/api/v1/nodes/n1", node).ok());
  ASSERT_TRUE(old_instance.Repair().ok());
  EXPECT_EQ(Label(), "cd-1") << "a claim in the shared ledger holds the label whichever instance prepared it";

  // A claim of the same domain on the old instance is unprepared: the new
  // instance's claim keeps the label.
  begin(**old_ledger, "uid-old", 1);
  ASSERT_TRUE(old_instance.Acquire("cd-1", "uid-old").ok());
  old_instance.Confirm("cd-1", "uid-old");
  ASSERT_TRUE((*old_ledger)->BeginUnprepare("uid-old").ok());
  old_instance.Release("cd-1", "uid-old");
  ASSERT_TRUE((*old_ledger)->FinishUnprepare("uid-old").ok());
  EXPECT_EQ(Label(), "cd-1") << "the old instance's last claim removed a label the new instance's claim holds";

  // Two channel claims of the domain on the new instance, unprepared
  // together: each Unprepare has begun before either ends, so the second
  // Release still finds the first in the ledger (UnprepareStarted). The
  // last of them takes the label away; after that neither instance puts it
  // back.
  begin(**new_ledger, "uid-new-2", 2);
  ASSERT_TRUE(new_instance.Acquire("cd-1", "uid-new-2").ok());
  new_instance.Confirm("cd-1", "uid-new-2");
  ASSERT_TRUE((*new_ledger)->BeginUnprepare("uid-new").ok());
  ASSERT_TRUE((*new_ledger)->BeginUnprepare("uid-new-2").ok());
  new_instance.Release("cd-1", "uid-new");
  EXPECT_EQ(Label(), "cd-1") << "uid-new-2 holds it in this process";
  new_instance.Release("cd-1", "uid-new-2");
  EXPECT_EQ(Label(), std::nullopt) << "the last channel claim kept the label for one already being unprepared";
  ASSERT_TRUE(old_instance.Repair().ok());
  EXPECT_EQ(Label(), std::nullopt) << "Repair put the label back for claims being unprepared";
  ASSERT_TRUE((*new_ledger)->FinishUnprepare("uid-new").ok());
  ASSERT_TRUE((*new_ledger)->FinishUnprepare("uid-new-2").ok());
  EXPECT_EQ(Label(), std::nullopt);
  ASSERT_TRUE(old_instance.Repair().ok());
  ASSERT_TRUE(new_instance.Repair().ok());
  EXPECT_EQ(Label(), std::nullopt);
}

}  // namespace
}  // namespace nvdra::computedomain
