// The GPU kind's published devices: upstream's attribute set and
// capacities for full GPUs and MIG devices, versions coerced as upstream.
#include "gpu/gpu_published_devices.h"

#include <gtest/gtest.h>

#include <set>

#include "devices/mock/mock_device_lib.h"
#include "util/test_temp_dir.h"

namespace nvdra::gpu {
namespace {

Result<devices::NodeInventory> DiscoverBuiltin(const std::string& name, const std::string& root) {
  NVDRA_ASSIGN_OR_RETURN(auto profile, devices::LoadMockProfile(name));
  NVDRA_ASSIGN_OR_RETURN(auto lib, devices::MockDeviceLib::Create(std::move(profile), root));
  return lib->Discover();
}

// Upstream's attributes, the NUMA node from the (fake) sysfs included.
TEST(GpuPublishedDevicesTest, H100HasUpstreamsAttributes) {
  nvdra::testing::TempDir t;
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
                                         "resource.kubernetes.io/numaNode", "addressingMode"}));
  EXPECT_EQ(std::get<int64_t>(d.attributes.at("resource.kubernetes.io/numaNode")), 0);
  EXPECT_EQ(std::get<int64_t>(devs[7].attributes.at("resource.kubernetes.io/numaNode")), 1);
  EXPECT_EQ(std::get<std::string>(d.attributes.at("resource.kubernetes.io/pcieRoot")), "pci0000:15");
  EXPECT_EQ(std::get<std::string>(d.attributes.at("type")), "gpu");
  EXPECT_EQ(std::get<model::Version>(d.attributes.at("driverVersion")).value, "570.158.1");
  EXPECT_EQ(std::get<model::Version>(d.attributes.at("cudaComputeCapability")).value, "9.0.0");
  EXPECT_EQ(std::get<model::Version>(d.attributes.at("cudaDriverVersion")).value, "12.8.0");
  EXPECT_EQ(d.capacity.at("memory"), "85520809984");
  // Sorted by PCI bus id.
  for (size_t i = 1; i < devs.size(); ++i) EXPECT_LT(devs[i - 1].sort_key, devs[i].sort_key);
}

TEST(GpuPublishedDevicesTest, MigEnabledGpusPublishOnlyTheirMigDevices) {
  nvdra::testing::TempDir t;
  auto inv = DiscoverBuiltin("a100-mig", t.path());
  ASSERT_TRUE(inv.ok());
  auto devs = GpuPublishedDevices(*inv);
  std::vector<std::string> names;
  for (const auto& d : devs) names.push_back(d.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"gpu-0", "gpu-1", "gpu-2-mig-1g5gb-19-6", "gpu-2-mig-2g10gb-14-4",
                                      "gpu-2-mig-3g20gb-9-0", "gpu-3-mig-1c3g20gb-9-4", "gpu-3-mig-1g5gb-me-20-0"}));
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

TEST(GpuPublishedDevicesTest, BadVersionIsLeftOutNotPublishedWrong) {
  devices::NodeInventory inv;
  devices::GpuInfo g{.minor = 0,
                     .uuid = "GPU-x",
                     .cuda_compute_capability = "9.0",
                     .driver_version = "abc",
                     .cuda_driver_version = "12.8",
                     .pci_bus_id = "0000:01:00.0"};
  inv.gpus.push_back(g);
  auto devs = GpuPublishedDevices(inv);
  ASSERT_EQ(devs.size(), 1u);
  EXPECT_EQ(devs[0].attributes.count("driverVersion"), 0u);
  EXPECT_EQ(devs[0].attributes.count("cudaDriverVersion"), 1u);
  EXPECT_EQ(devs[0].capacity.count("memory"), 0u) << "unknown memory is not published";
}

TEST(GpuPublishedDevicesTest, VersionsAreCoercedLikeUpstream) {
  EXPECT_EQ(*NormalizeVersion("570.158.01"), "570.158.1");
  EXPECT_EQ(*NormalizeVersion("9.0"), "9.0.0");
  EXPECT_EQ(*NormalizeVersion("12.8"), "12.8.0");
  EXPECT_EQ(*NormalizeVersion("10"), "10.0.0");
  EXPECT_EQ(*NormalizeVersion("v1.2.3"), "1.2.3");
  EXPECT_FALSE(NormalizeVersion("").ok());
  EXPECT_FALSE(NormalizeVersion("1.2.3.4").ok());
  EXPECT_FALSE(NormalizeVersion("abc").ok());
  EXPECT_FALSE(NormalizeVersion("1..2").ok());
}

// With DRAListTypeAttributes the NUMA node takes its list form, on full
// GPUs and on MIG devices, as upstream; other attributes keep theirs.
TEST(GpuPublishedDevicesTest, ListTypeAttributesGiveTheNumaNodeAsAList) {
  nvdra::testing::TempDir t;
  auto inv = DiscoverBuiltin("h100x8", t.path());
  ASSERT_TRUE(inv.ok());
  auto gates = config::FeatureGates::Parse("DRAListTypeAttributes=true");
  ASSERT_TRUE(gates.ok());
  auto devs = GpuPublishedDevices(*inv, *gates);
  ASSERT_EQ(devs.size(), 8u);
  EXPECT_EQ(std::get<model::IntList>(devs[0].attributes.at("resource.kubernetes.io/numaNode")).values,
            std::vector<int64_t>{0});
  EXPECT_EQ(std::get<model::IntList>(devs[7].attributes.at("resource.kubernetes.io/numaNode")).values,
            std::vector<int64_t>{1});
  EXPECT_EQ(std::get<std::string>(devs[0].attributes.at("resource.kubernetes.io/pcieRoot")), "pci0000:15");
  // A GPU without a NUMA node (a100-mig has none) has no attribute in either form.
  auto a100 = DiscoverBuiltin("a100-mig", t.path() + "/a100");
  ASSERT_TRUE(a100.ok());
  for (const auto& d : GpuPublishedDevices(*a100, *gates)) {
    EXPECT_EQ(d.attributes.count("resource.kubernetes.io/numaNode"), 0u) << d.name;
  }
}

}  // namespace

}  // namespace nvdra::gpu
