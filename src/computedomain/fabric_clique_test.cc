// IdentifyClique: upstream's fabric policy, including the single-node NVLink
// exception to CrashOnNVLinkFabricErrors.
#include "computedomain/fabric_clique.h"

#include <gtest/gtest.h>

namespace nvdra::computedomain {
namespace {

GpuFabricReading Gpu(const std::string& cluster, unsigned clique, bool completed = true) {
  GpuFabricReading g;
  g.gpu = "GPU-" + std::to_string(clique);
  g.cluster_uuid = cluster;
  g.clique_id = clique;
  g.completed = completed;
  g.detail = completed ? "completed" : "state in progress";
  return g;
}

constexpr const char* kCluster = "5e2c8a14-7d3b-4f9e-a1c6-0b8d2f4e6a90";

TEST(FabricCliqueTest, AgreeingGpusGiveTheClique) {
  auto c = IdentifyClique({Gpu(kCluster, 3), Gpu(kCluster, 3)}, true);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->clique_id, std::string(kCluster) + ".3");
  EXPECT_EQ(CliqueLogLine(*c), std::string("identified fabric clique: ") + kCluster + ".3");
}

TEST(FabricCliqueTest, NoFabricOrZeroClusterMeansNoClique) {
  GpuFabricReading unsupported;
  unsupported.supported = false;
  auto c = IdentifyClique({unsupported, unsupported}, true);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->clique_id, "");
  c = IdentifyClique({Gpu("", 0)}, true);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->clique_id, "");
}

TEST(FabricCliqueTest, AMultiNodeFabricErrorIsFatalOnlyWithTheGate) {
  auto fatal = IdentifyClique({Gpu(kCluster, 3), Gpu(kCluster, 3, false)}, true);
  ASSERT_FALSE(fatal.ok());
  EXPECT_NE(fatal.status().message().find("CrashOnNVLinkFabricErrors"), std::string::npos);
  auto tolerated = IdentifyClique({Gpu(kCluster, 3, false), Gpu(kCluster, 3, false)}, false);
  ASSERT_TRUE(tolerated.ok());
  EXPECT_EQ(tolerated->clique_id, "");
  EXPECT_NE(tolerated->warning.find("not ready"), std::string::npos);
}

TEST(FabricCliqueTest, SingleNodeNvlinkSystemsDoNotCrashOnFabricErrors) {
  auto c = IdentifyClique({Gpu("", 0, false), Gpu("", 0, false)}, true);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->clique_id, "");
  EXPECT_NE(c->warning.find("single-node NVLink system"), std::string::npos);
}

TEST(FabricCliqueTest, DisagreeingGpusAreAnError) {
  auto c = IdentifyClique({Gpu(kCluster, 3), Gpu(kCluster, 4)}, true);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("disagree"), std::string::npos);
}

TEST(FabricCliqueTest, DriverVersionValidationForDnsNames) {
  auto ok = ValidateDriverVersion("570.158.01", true);
  ASSERT_TRUE(ok.ok());
  EXPECT_NE(ok->find("driver version validation"), std::string::npos);
  EXPECT_TRUE(ValidateDriverVersion("580.65.06", true).ok());
  auto old = ValidateDriverVersion("570.124.06", true);
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find("minimum version not satisfied for IMEXDaemonsWithDNSNames feature"),
            std::string::npos);
  EXPECT_FALSE(ValidateDriverVersion("550.127.08", true).ok());
  EXPECT_TRUE(ValidateDriverVersion("550.127.08", false).ok());
}

TEST(FabricCliqueTest, TheNodeCliqueComesFromTheInventorysFabricReadings) {
  devices::NodeInventory inv;
  inv.gpus.resize(2);
  inv.gpus[0].uuid = "GPU-a";
  inv.gpus[1].uuid = "GPU-b";
  for (auto& g : inv.gpus) {
    g.fabric = devices::FabricReading{};
    g.fabric->cluster_uuid = kCluster;
    g.fabric->clique_id = 4;
  }
  auto c = IdentifyNodeClique(inv, true);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->clique_id, std::string(kCluster) + ".4");

  // GPU-b's multi-node fabric is not up: fatal with the gate, naming it;
  // without the gate a warning and no clique.
  inv.gpus[1].fabric->completed = false;
  inv.gpus[1].fabric->detail = "state 2";
  c = IdentifyNodeClique(inv, true);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(c.status().message().find("GPU-b"), std::string::npos) << c.status().message();
  c = IdentifyNodeClique(inv, false);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->clique_id, "");
  EXPECT_NE(c->warning.find("GPU-b"), std::string::npos);

  // With FabricManagerPartitioning on a local NVSwitch fabric, a pending
  // registration waits for a partition: no crash, no clique, as upstream; a
  // completed registration with an error status still crashes.
  c = IdentifyNodeClique(inv, true, true);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->clique_id, "");
  EXPECT_NE(c->warning.find("Fabric Manager partition"), std::string::npos) << c->warning;
  inv.gpus[1].fabric->completed = true;
  inv.gpus[1].fabric->healthy = false;
  EXPECT_FALSE(IdentifyNodeClique(inv, true, true).ok());
  inv.gpus[1].fabric->completed = false;
  inv.gpus[1].fabric->healthy = true;

  // A single-node NVLink system (no cluster UUID) never crashes.
  for (auto& g : inv.gpus) g.fabric->cluster_uuid = "";
  c = IdentifyNodeClique(inv, true);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->clique_id, "");

  // Without readings (the mock backend) the inventory's clique stands.
  devices::NodeInventory mock;
  mock.gpus.resize(1);
  mock.clique_id = "cluster.1";
  c = IdentifyNodeClique(mock, true);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->clique_id, "cluster.1");
}

}  // namespace
}  // namespace nvdra::computedomain
