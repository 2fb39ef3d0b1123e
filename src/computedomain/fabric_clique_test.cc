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

}  // namespace
}  // namespace nvdra::computedomain
