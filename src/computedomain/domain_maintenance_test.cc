// DomainMaintenance against the test API server: directories of deleted
// domains removed, the clique followed when the fabric changes, and the
// optional nvidia.com/gpu.clique label.
#include "computedomain/domain_maintenance.h"

#include <gtest/gtest.h>

#include "kube/node_labels.h"
#include "test_apiserver.h"
#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::computedomain {
namespace {

using nlohmann::json;
using nvdra::testing::TestApiServer;
using Steady = std::chrono::steady_clock;

TEST(DomainMaintenanceTest, RemovesGoneDomainsFollowsTheCliqueAndLabelsIt) {
  TestApiServer server;
  ASSERT_TRUE(server.ok()) << server.error();
  ASSERT_TRUE(server.LoadObject({{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n1"}}}}).ok());
  ASSERT_TRUE(server
                  .LoadObject({{"apiVersion", "resource.nvidia.com/v1beta1"},
                               {"kind", "ComputeDomain"},
                               {"metadata", {{"name", "live"}, {"namespace", "ns"}, {"uid", "live-uid"}}}})
                  .ok());
  kube::KubeClientOptions ko;
  ko.qps = 0;
  auto client = kube::KubeClient::FromConfig(server.Config(), ko);
  DomainWatchOptions wo;
  wo.node_name = "n1";
  wo.clique_id = "c.1";
  DomainWatch watch(*client, wo);
  watch.Activate();
  ASSERT_TRUE(watch.WaitSynced(Steady::now() + std::chrono::seconds(15)));
  NodeLabelManager labels(*client, "n1");
  nvdra::testing::TempDir tmp;
  ASSERT_TRUE(WriteFileAtomically(JoinPath(tmp.path(), "t.cfg"), "x").ok());
  DomainDirectories dirs(tmp.path(), JoinPath(tmp.path(), "t.cfg"));
  ASSERT_TRUE(dirs.Prepare("live-uid").ok());
  ASSERT_TRUE(dirs.Prepare("gone-uid").ok());

  std::string fabric = "c.1";
  std::string seen_change;
  DomainMaintenanceOptions o;
  o.node_name = "n1";
  o.read_clique = [&]() -> Result<std::string> { return fabric; };
  o.on_clique_change = [&](const std::string& c) { seen_change = c; };
  o.gpu_clique_label = true;
  DomainMaintenance m(*client, watch, labels, dirs, o);

  auto rep = m.RunOnce();
  EXPECT_TRUE(rep.label.ok()) << rep.label.ToString();
  EXPECT_TRUE(rep.clique.ok()) << rep.clique.ToString();
  EXPECT_EQ(rep.removed_dirs, std::vector<std::string>{"gone-uid"});
  EXPECT_TRUE(PathExists(dirs.Dir("live-uid")));
  EXPECT_FALSE(rep.clique_changed);
  EXPECT_EQ(kube::NodeLabel((*server.Objects("nodes"))[0], kGpuCliqueLabel), "c.1");

  fabric = "c.2";  // the fabric was repartitioned
  rep = m.RunOnce();
  EXPECT_TRUE(rep.clique_changed);
  EXPECT_EQ(seen_change, "c.2");
  EXPECT_EQ(watch.clique_id(), "c.2");
  EXPECT_EQ(kube::NodeLabel((*server.Objects("nodes"))[0], kGpuCliqueLabel), "c.2");
  fabric = "";
  m.RunOnce();
  EXPECT_EQ(kube::NodeLabel((*server.Objects("nodes"))[0], kGpuCliqueLabel), std::nullopt);
}

std::optional<std::string> Annotation(const json& node, const std::string& key) {
  auto a = node["metadata"].value("annotations", json::object());
  if (!a.contains(key)) return std::nullopt;
  return a[key].get<std::string>();
}

TEST(DomainMaintenanceTest, TurningTheCliqueLabelOffRemovesTheLabelNvdraSetAndNoOtherOwners) {
  TestApiServer server;
  ASSERT_TRUE(server.ok()) << server.error();
  // n2's label comes from someone else (gpu-feature-discovery).
  ASSERT_TRUE(server.LoadObject({{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n1"}}}}).ok());
  ASSERT_TRUE(server
                  .LoadObject({{"apiVersion", "v1"},
                               {"kind", "Node"},
                               {"metadata", {{"name", "n2"}, {"labels", {{kGpuCliqueLabel, "gfd.7"}}}}}})
                  .ok());
  kube::KubeClientOptions ko;
  ko.qps = 0;
  auto client = kube::KubeClient::FromConfig(server.Config(), ko);
  nvdra::testing::TempDir tmp;
  DomainDirectories dirs(tmp.path(), "");
  auto node = [&](const std::string& name) {
    auto nodes = server.Objects("nodes");
    if (!nodes.ok()) return json::object();
    for (const json& n : *nodes) {
      if (n["metadata"]["name"] == name) return n;
    }
    return json::object();
  };
  auto pass = [&](const std::string& name, bool enabled) {
    DomainWatchOptions wo;
    wo.node_name = name;
    wo.clique_id = "c.1";
    DomainWatch watch(*client, wo);
    NodeLabelManager labels(*client, name);
    DomainMaintenanceOptions o;
    o.node_name = name;
    o.gpu_clique_label = enabled;
    o.repair_node_label = false;
    DomainMaintenance m(*client, watch, labels, dirs, o);
    auto rep = m.RunOnce();
    EXPECT_TRUE(rep.clique.ok()) << rep.clique.ToString();
  };

  pass("n1", true);  // the plugin with GPU_CLIQUE_LABEL_ENABLED=true
  EXPECT_EQ(kube::NodeLabel(node("n1"), kGpuCliqueLabel), "c.1");
  EXPECT_EQ(Annotation(node("n1"), kGpuCliqueLabelOwner), "true");
  pass("n1", false);  // restarted with it off
  EXPECT_EQ(kube::NodeLabel(node("n1"), kGpuCliqueLabel), std::nullopt);
  EXPECT_EQ(Annotation(node("n1"), kGpuCliqueLabelOwner), std::nullopt);
  pass("n1", false);  // nothing left to remove: no error
  pass("n2", false);
  EXPECT_EQ(kube::NodeLabel(node("n2"), kGpuCliqueLabel), "gfd.7");
}

TEST(DomainMaintenanceTest, OpensTheWatchesWhileTheNodeIsBusyAndClosesThemOnceIdleForTheLinger) {
  TestApiServer server;
  ASSERT_TRUE(server.ok()) << server.error();
  ASSERT_TRUE(server.LoadObject({{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n1"}}}}).ok());
  kube::KubeClientOptions ko;
  ko.qps = 0;
  auto client = kube::KubeClient::FromConfig(server.Config(), ko);
  DomainWatchOptions wo;
  wo.node_name = "n1";
  wo.watch_node = true;
  DomainWatch watch(*client, wo);
  NodeLabelManager labels(*client, "n1", watch.node());
  nvdra::testing::TempDir tmp;
  DomainDirectories dirs(tmp.path(), "");
  bool busy = true;
  DomainMaintenanceOptions o;
  o.node_name = "n1";
  o.busy = [&] { return busy; };
  o.watch_linger = std::chrono::milliseconds(0);
  DomainMaintenance m(*client, watch, labels, dirs, o);

  // Claims from before a restart: the pass opens the watches.
  auto rep = m.RunOnce();
  EXPECT_TRUE(watch.active());
  EXPECT_FALSE(rep.watches_closed);
  ASSERT_TRUE(watch.WaitSynced(Steady::now() + std::chrono::seconds(15)));
  rep = m.RunOnce();
  EXPECT_TRUE(watch.active());
  EXPECT_TRUE(rep.label.ok()) << rep.label.ToString();
  // The streams that follow the lists are open, so each request the opening
  // sent is on the server's record before the record is cleared below.
  EXPECT_TRUE(server.OpenWatchesReach("computedomains", 1));
  EXPECT_TRUE(server.OpenWatchesReach("nodes", 1));
  // The last claim went away: the next pass closes them (no linger here).
  busy = false;
  rep = m.RunOnce();
  EXPECT_TRUE(rep.watches_closed);
  EXPECT_FALSE(watch.active());
  EXPECT_TRUE(server.OpenWatchesReach("computedomains", 0));
  EXPECT_TRUE(server.OpenWatchesReach("nodes", 0));
  // Idle passes after it make no API call at all.
  ASSERT_TRUE(server.Requests(true).ok());
  rep = m.RunOnce();
  rep = m.RunOnce();
  EXPECT_FALSE(rep.watches_closed);
  EXPECT_FALSE(watch.active());
  auto idle = server.Requests();
  ASSERT_TRUE(idle.ok());
  EXPECT_TRUE(idle->empty()) << idle->dump();
  EXPECT_EQ(watch.activations(), 1u);
}

}  // namespace
}  // namespace nvdra::computedomain
