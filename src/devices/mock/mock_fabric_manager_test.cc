// The mock node's Fabric Manager and the profile fields that describe it.
#include "devices/mock/mock_fabric_manager.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "devices/mock/mock_profile.h"
#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::devices {
namespace {

using nlohmann::json;

TEST(MockFabricManagerTest, TheProfileSaysThePartitionsAndTheRootKeepsTheirState) {
  auto profile = LoadMockProfile("h100x8");
  ASSERT_TRUE(profile.ok());
  ASSERT_EQ(profile->fabric_partitions.size(), 15u);
  EXPECT_EQ(profile->fabric_partitions[3].ModuleIds(), (std::vector<int>{1, 2}));
  EXPECT_EQ(profile->fabric_partitions[3].gpus[0].uuid, profile->inventory.gpus[0].uuid);
  EXPECT_EQ(profile->inventory.gpus[7].module_id, std::optional<int>(8));
  ::nvdra::testing::TempDir tmp("nvdra-mock-fm");
  MockFabricManager fm(profile->fabric_partitions, tmp.path());
  ASSERT_TRUE(fm.Activate(3).ok());
  EXPECT_EQ(fm.Activate(3).code(), StatusCode::kFailedPrecondition) << "active already";
  EXPECT_NE(fm.Activate(1).message().find("RESOURCE_USED_IN_ANOTHER_PARTITION"), std::string::npos)
      << "shares GPUs with partition 3";
  ASSERT_TRUE(fm.Activate(4).ok());
  // Another process on the same root sees it.
  MockFabricManager other(profile->fabric_partitions, tmp.path());
  auto parts = other.Partitions();
  ASSERT_TRUE(parts.ok());
  std::vector<int> active;
  for (const auto& p : *parts) {
    if (p.active) active.push_back(p.id);
  }
  EXPECT_EQ(active, (std::vector<int>{3, 4}));
  ASSERT_TRUE(other.Deactivate(3).ok());
  EXPECT_FALSE(other.Deactivate(3).ok()) << "inactive already";
  EXPECT_FALSE(other.Activate(99).ok());
  EXPECT_EQ(*ReadFileToString(fm.log_path()), "activate 3\nactivate 4\ndeactivate 3\n");
  EXPECT_EQ(json::parse(*ReadFileToString(fm.state_path())), json::parse(R"({"active": [4]})"));
  ASSERT_TRUE(WriteFileAtomically(fm.failures_path(), "deactivate *\n").ok());
  EXPECT_NE(fm.Deactivate(4).message().find("GENERIC_ERROR"), std::string::npos);
}

TEST(MockFabricManagerTest, ProfilePartitionsMustNameTheProfilesGpus) {
  const std::string head = R"({"driverVersion":"1.2","cudaDriverVersion":"12.0","gpus":[{"count":2,)"
                           R"("productName":"a","brand":"b","architecture":"c","cudaComputeCapability":"8.0")";
  auto ok = ParseMockProfile(head + R"(,"moduleIds":[1,2]}],"fabricPartitions":[{"id":0,"moduleIds":[1,2]}]})", "x");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->fabric_partitions[0].gpus[1].pci_bus_id, ok->inventory.gpus[1].pci_bus_id);
  auto unknown = ParseMockProfile(head + R"(,"moduleIds":[1,2]}],"fabricPartitions":[{"id":0,"moduleIds":[3]}]})", "x");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("no GPU has module id 3"), std::string::npos);
  EXPECT_FALSE(ParseMockProfile(head + R"(,"moduleIds":[1]}]})", "x").ok()) << "one per GPU";
  EXPECT_FALSE(ParseMockProfile(head + R"(,"moduleIds":[1,1]}]})", "x").ok()) << "distinct";
  EXPECT_FALSE(ParseMockProfile(head + R"(,"moduleIds":[0,1]}]})", "x").ok()) << "0 is no module id";
  auto dup = ParseMockProfile(
      head + R"(,"moduleIds":[1,2]}],"fabricPartitions":[{"id":0,"moduleIds":[1]},{"id":0,"moduleIds":[2]}]})", "x");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("duplicate partitionId 0"), std::string::npos);
  // Without the list: no fabric.
  auto none = LoadMockProfile("gb200x4");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->fabric_partitions.empty());
}

}  // namespace
}  // namespace nvdra::devices
