#include "util/test_paths.h"
#include "devices/published_devices.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "cdi/testdata/golden.h"
#include "devices/inventory_json.h"
#include "devices/mock/mock_device_lib.h"
#include "util/test_temp_dir.h"

namespace nvdra::devices {
namespace {

const std::string kTestdata = std::string(NVDRA_SOURCE_DIR) + "/src/devices/testdata/";

Result<NodeInventory> DiscoverBuiltin(const std::string& name, const std::string& root) {
  NVDRA_ASSIGN_OR_RETURN(auto profile, LoadMockProfile(name));
  NVDRA_ASSIGN_OR_RETURN(auto lib, MockDeviceLib::Create(std::move(profile), root));
  return lib->Discover();
}

class BuiltinProfileTest : public ::testing::TestWithParam<std::string> {};

// The whole discovery result (inventory and published devices) of each
// built-in profile is pinned by a golden file.
TEST_P(BuiltinProfileTest, MatchesGolden) {
  testing::TempDir t;
  auto inv = DiscoverBuiltin(GetParam(), t.path());
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  std::string out = RenderDiscoveryJson(*inv, GpuPublishedDevices(*inv),
                                        inv->clique_id.empty() ? std::vector<model::PublishedDevice>{}
                                                               : ComputeDomainPublishedDevices(1));
  testing::ExpectMatchesGolden(kTestdata + "profile-" + GetParam() + ".json", out);
}

INSTANTIATE_TEST_SUITE_P(Builtins, BuiltinProfileTest, ::testing::Values("h100x8", "a100-mig", "gb200x4"));

TEST(PublishedDevicesTest, H100HasExactUpstreamAttributeSet) {
  testing::TempDir t;
  auto inv = DiscoverBuiltin("h100x8", t.path());
  ASSERT_TRUE(inv.ok());
  auto devs = GpuPublishedDevices(*inv);
  ASSERT_EQ(devs.size(), 8u);
  std::set<std::string> names;
  for (const auto& d : devs) names.insert(d.name);
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(names.count("gpu-" + std::to_string(i))) << i;
  const auto& d = devs[0];
  std::set<std::string> keys;
  for (const auto& [k, _] : d.attributes) keys.insert(k);
  EXPECT_EQ(keys, (std::set<std::string>{"type", "uuid", "productName", "brand", "architecture",
                                         "cudaComputeCapability", "driverVersion", "cudaDriverVersion",
                                         "resource.kubernetes.io/pciBusID", "resource.kubernetes.io/pcieRoot",
                                         "addressingMode"}));
  EXPECT_EQ(std::get<std::string>(d.attributes.at("type")), "gpu");
  EXPECT_EQ(std::get<model::Version>(d.attributes.at("driverVersion")).value, "570.158.1");
  EXPECT_EQ(std::get<model::Version>(d.attributes.at("cudaComputeCapability")).value, "9.0.0");
  EXPECT_EQ(std::get<model::Version>(d.attributes.at("cudaDriverVersion")).value, "12.8.0");
  EXPECT_EQ(d.capacity.at("memory"), "85520809984");
  // Sorted by PCI bus id.
  for (size_t i = 1; i < devs.size(); ++i) EXPECT_LT(devs[i - 1].sort_key, devs[i].sort_key);
}

TEST(PublishedDevicesTest, MigEnabledGpusPublishOnlyTheirMigDevices) {
  testing::TempDir t;
  auto inv = DiscoverBuiltin("a100-mig", t.path());
  ASSERT_TRUE(inv.ok());
  auto devs = GpuPublishedDevices(*inv);
  std::vector<std::string> names;
  for (const auto& d : devs) names.push_back(d.name);
  EXPECT_EQ(names, (std::vector<std::string>{"gpu-0", "gpu-1", "gpu-2-mig-1g5gb-19-6", "gpu-2-mig-2g10gb-14-4",
                                             "gpu-2-mig-3g20gb-9-0", "gpu-3-mig-1c3g20gb-9-4",
                                             "gpu-3-mig-1g5gb-me-20-0"}));
  const auto& mig = devs[2];
  EXPECT_EQ(std::get<std::string>(mig.attributes.at("type")), "mig");
  EXPECT_EQ(std::get<std::string>(mig.attributes.at("profile")), "1g.5gb");
  EXPECT_EQ(std::get<std::string>(mig.attributes.at("parentUUID")), inv->gpus[2].uuid);
  EXPECT_EQ(mig.capacity.at("multiprocessors"), "14");
  EXPECT_EQ(mig.capacity.at("memorySlice6"), "1");
  EXPECT_EQ(mig.capacity.count("memorySlice5"), 0u);
  EXPECT_EQ(mig.capacity.at("memory"), "5100273664");
  EXPECT_EQ(mig.capacity.size(), 8u);
  EXPECT_EQ(mig.attributes.count("addressingMode"), 0u);
}

TEST(PublishedDevicesTest, ComputeDomainDevices) {
  auto devs = ComputeDomainPublishedDevices();
  ASSERT_EQ(devs.size(), 2u);
  EXPECT_EQ(devs[0].name, "channel-0");
  EXPECT_EQ(devs[1].name, "daemon-0");
  EXPECT_EQ(std::get<std::string>(devs[0].attributes.at("type")), "channel");
  EXPECT_EQ(std::get<int64_t>(devs[0].attributes.at("id")), 0);
  EXPECT_EQ(std::get<std::string>(devs[1].attributes.at("type")), "daemon");
  EXPECT_TRUE(devs[0].capacity.empty());
  EXPECT_EQ(ComputeDomainPublishedDevices(4).size(), 5u);
  EXPECT_EQ(ComputeDomainPublishedDevices(100000).size(), static_cast<size_t>(kMaxImexChannels + 1));
}

TEST(PublishedDevicesTest, BadVersionIsLeftOutNotPublishedWrong) {
  NodeInventory inv;
  GpuInfo g{.minor = 0, .uuid = "GPU-x", .cuda_compute_capability = "9.0", .driver_version = "abc",
            .cuda_driver_version = "12.8", .pci_bus_id = "0000:01:00.0"};
  inv.gpus.push_back(g);
  auto devs = GpuPublishedDevices(inv);
  ASSERT_EQ(devs.size(), 1u);
  EXPECT_EQ(devs[0].attributes.count("driverVersion"), 0u);
  EXPECT_EQ(devs[0].attributes.count("cudaDriverVersion"), 1u);
  EXPECT_EQ(devs[0].capacity.count("memory"), 0u) << "unknown memory is not published";
}

TEST(PublishedDevicesTest, RenderedDevicesParse) {
  auto j = nlohmann::json::parse(RenderPublishedDevicesJson(ComputeDomainPublishedDevices()));
  EXPECT_EQ(j[1]["attributes"]["type"]["string"], "daemon");
  EXPECT_EQ(j[0]["attributes"]["id"]["int"], 0);
}

}  // namespace
}  // namespace nvdra::devices
