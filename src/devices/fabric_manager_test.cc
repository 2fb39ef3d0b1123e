// The Fabric Manager port's shared rules: partition checks, the partitionN
// map, set matching and fabric detection.
#include "devices/fabric_manager.h"

#include <gtest/gtest.h>

#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::devices {
namespace {

FabricPartition Part(int id, std::vector<int> modules) {
  FabricPartition p;
  p.id = id;
  for (int m : modules) p.gpus.push_back({m, "GPU-" + std::to_string(m), ""});
  return p;
}

TEST(FabricPartitionRulesTest, ChecksAsUpstreamDoes) {
  EXPECT_TRUE(ValidateFabricPartitions({Part(0, {1, 2}), Part(1, {1})}).ok());
  EXPECT_EQ(ValidateFabricPartitions({Part(0, {1}), Part(0, {2})}).message(),
            "fabricmanager: FM returned duplicate partitionId 0");
  EXPECT_EQ(ValidateFabricPartitions({Part(4, {})}).message(), "fabricmanager: partition 4 has no GPUs");
  EXPECT_EQ(ValidateFabricPartitions({Part(2, {3, 3})}).message(),
            "fabricmanager: partition 2 references gpuModuleID 3 twice");
}

TEST(FabricPartitionRulesTest, PartitionOfEachSizePerModule) {
  auto m = PartitionsBySizeByModuleId({Part(0, {1, 2}), Part(1, {1}), Part(2, {2})});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m)[1], (std::map<int, int>{{1, 1}, {2, 0}}));
  EXPECT_EQ((*m)[2], (std::map<int, int>{{1, 2}, {2, 0}}));
  auto twice = PartitionsBySizeByModuleId({Part(3, {1, 2}), Part(5, {1, 3})});
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().message(), "fabricmanager: gpuModuleID 1 appears in two partitions of size 2 (3 and 5)");
}

TEST(FabricPartitionRulesTest, MatchesTheExactMemberSetInAnyOrder) {
  std::vector<FabricPartition> parts = {Part(0, {1, 2, 3, 4}), Part(1, {1, 2}), Part(2, {3, 4}), Part(3, {1})};
  ASSERT_NE(FindPartitionByModuleIds(parts, {2, 1}), nullptr);
  EXPECT_EQ(FindPartitionByModuleIds(parts, {2, 1})->id, 1);
  EXPECT_EQ(FindPartitionByModuleIds(parts, {4, 3, 2, 1})->id, 0);
  EXPECT_EQ(FindPartitionByModuleIds(parts, {1})->id, 3);
  EXPECT_EQ(FindPartitionByModuleIds(parts, {1, 3}), nullptr) << "a subset of a larger one is no match";
  EXPECT_EQ(FindPartitionByModuleIds(parts, {1, 2, 3}), nullptr);
  EXPECT_EQ(FindPartitionByModuleIds(parts, {}), nullptr);
}

// A file and its parent directories.
bool Put(const std::string& path, const std::string& content) {
  return MakeDirectories(path.substr(0, path.rfind('/'))).ok() && WriteFileAtomically(path, content).ok();
}

TEST(FabricDetectionTest, NvswitchDevicesOrASwitchManagedNvlink5Fabric) {
  ::nvdra::testing::TempDir tmp("nvdra-fabric-detect");
  const std::string proc = tmp.path() + "/proc", sys = tmp.path() + "/sys";
  auto has = HasFabricManagerFabric(proc, sys);
  ASSERT_TRUE(has.ok());
  EXPECT_FALSE(*has) << "neither directory exists";
  ASSERT_TRUE(MakeDirectories(proc + "/driver/nvidia-nvswitch/devices").ok());
  EXPECT_FALSE(*HasFabricManagerFabric(proc, sys)) << "no NVSwitch device";
  ASSERT_TRUE(Put(sys + "/class/infiniband/mlx5_0/device/vpd", "PN:MCX..."));
  EXPECT_FALSE(*HasFabricManagerFabric(proc, sys));
  ASSERT_TRUE(Put(sys + "/class/infiniband/mlx5_1/device/vpd", "xx SW_MNG yy"));
  EXPECT_TRUE(*HasFabricManagerFabric(proc, sys));
  ::nvdra::testing::TempDir tmp2("nvdra-fabric-detect");
  ASSERT_TRUE(Put(tmp2.path() + "/proc/driver/nvidia-nvswitch/devices/0000:05:00.0", ""));
  EXPECT_TRUE(*HasFabricManagerFabric(tmp2.path() + "/proc", tmp2.path() + "/sys"));
}

}  // namespace
}  // namespace nvdra::devices
