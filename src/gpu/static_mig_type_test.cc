// StaticMigType on a mock node: which MIG devices it publishes and under
// which names, their attributes and capacities, what their containers get,
// and that it leaves the node alone at Prepare and Unprepare.
#include "gpu/static_mig_type.h"

#include <gtest/gtest.h>

#include "devices/device_names.h"
#include "devices/mock/mock_node_fixture.h"
#include "gpu/gpu_device_types.h"
#include "util/file_util.h"

namespace nvdra::gpu {
namespace {

// a100-mig: gpu-0 and gpu-1 are full GPUs; gpu-2 (3g.20gb, 2g.10gb, 1g.5gb)
// and gpu-3 (1g.5gb+me, 1c.3g.20gb) are in MIG mode.
class StaticMigTypeTest : public ::testing::Test {
 protected:
  StaticMigTypeTest() : node_("a100-mig"), edits_({node_.Nodes(), node_.DriverFiles()}) {}

  const devices::GpuInfo& Gpu(int i) const { return node_.inv.gpus[i]; }
  // The published device of Gpu(gpu).migs[mig].
  GpuDevice Device(int gpu, int mig) const {
    for (auto& d : type_.Devices(node_.inv)) {
      if (&DetailOf<StaticMigDevice>(d).mig == &Gpu(gpu).migs[mig]) return d;
    }
    ADD_FAILURE() << "no device for MIG device " << mig << " of GPU " << gpu;
    return {};
  }

  devices::testing::MockNode node_;
  GpuContainerEdits edits_;
  StaticMigType type_;
};

TEST_F(StaticMigTypeTest, NamesItsTypeAndConfig) {
  EXPECT_EQ(type_.name(), "mig");
  EXPECT_EQ(type_.config_kind(), "MigDeviceConfig");
  auto defaults = type_.DefaultConfig(config::FeatureGates());
  ASSERT_TRUE(defaults.has_value());
  ASSERT_TRUE(defaults->Is<MigDeviceConfig>());
  // No sharing unless a config asks for it.
  EXPECT_FALSE(defaults->Get<MigDeviceConfig>().sharing.has_value());
}

TEST_F(StaticMigTypeTest, DevicesAreTheMigDevicesOfGpusInMigModeOnly) {
  std::vector<GpuDevice> devices = type_.Devices(node_.inv);
  std::vector<std::string> names;
  for (const auto& d : devices) {
    names.push_back(d.name);
    EXPECT_EQ(d.type, &type_) << d.name;
    ASSERT_NE(d.detail, nullptr) << d.name;
    const devices::MigDeviceInfo& mig = DetailOf<StaticMigDevice>(d).mig;
    EXPECT_EQ(d.name, devices::MigDeviceName(mig));
    // The parent is the inventory's GPU the MIG device lives on.
    ASSERT_NE(d.gpu, nullptr) << d.name;
    EXPECT_EQ(d.gpu->uuid, mig.parent_uuid) << d.name;
    EXPECT_TRUE(d.gpu->mig_enabled) << d.name;
    // A partition of its GPU that exists already, under its own UUID.
    EXPECT_TRUE(d.partition) << d.name;
    EXPECT_EQ(d.uuid, mig.uuid) << d.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"gpu-2-mig-3g20gb-9-0", "gpu-2-mig-2g10gb-14-4", "gpu-2-mig-1g5gb-19-6",
                                             "gpu-3-mig-1g5gb-me-20-0", "gpu-3-mig-1c3g20gb-9-4"}));
}

TEST_F(StaticMigTypeTest, AGpuOutOfMigModePublishesNoneOfItsOldMigDevices) {
  devices::NodeInventory inventory = node_.inv;
  inventory.gpus[3].mig_enabled = false;
  std::vector<std::string> names;
  for (const auto& d : type_.Devices(inventory)) names.push_back(d.name);
  EXPECT_EQ(names, (std::vector<std::string>{"gpu-2-mig-3g20gb-9-0", "gpu-2-mig-2g10gb-14-4", "gpu-2-mig-1g5gb-19-6"}));

  devices::testing::MockNode full("h100x8");
  EXPECT_TRUE(type_.Devices(full.inv).empty());
}

TEST_F(StaticMigTypeTest, PublishesTheMigDevicesIdentityAndCapacities) {
  GpuDevice device = Device(2, 0);  // 3g.20gb at memory slices 0-3
  model::PublishedDevice d = type_.Publish(device);
  EXPECT_EQ(d.name, "gpu-2-mig-3g20gb-9-0");
  using V = model::AttributeValue;
  EXPECT_EQ(d.attributes["type"], V(std::string("mig")));
  EXPECT_EQ(d.attributes["uuid"], V(Gpu(2).migs[0].uuid));
  EXPECT_EQ(d.attributes["parentUUID"], V(Gpu(2).uuid));
  EXPECT_EQ(d.attributes["profile"], V(std::string("3g.20gb")));
  // The parent GPU's attributes.
  EXPECT_EQ(d.attributes["productName"], V(std::string("NVIDIA A100-SXM4-40GB")));
  EXPECT_EQ(d.attributes["resource.kubernetes.io/pciBusID"], V(std::string("0000:47:00.0")));
  EXPECT_EQ(d.capacity, (std::map<std::string, std::string>{{"multiprocessors", "42"},
                                                            {"copyEngines", "3"},
                                                            {"decoders", "2"},
                                                            {"encoders", "0"},
                                                            {"jpegEngines", "0"},
                                                            {"ofaEngines", "0"},
                                                            {"memory", "20937965568"},
                                                            {"memorySlice0", "1"},
                                                            {"memorySlice1", "1"},
                                                            {"memorySlice2", "1"},
                                                            {"memorySlice3", "1"}}));
}

TEST_F(StaticMigTypeTest, EachDeviceHoldsOnlyTheMemorySlicesOfItsPlacement) {
  model::PublishedDevice one_slice = type_.Publish(Device(2, 2));  // 1g.5gb at slice 6
  std::vector<std::string> slices;
  for (const auto& [name, value] : one_slice.capacity) {
    if (name.starts_with("memorySlice")) slices.push_back(name + "=" + value);
  }
  EXPECT_EQ(slices, std::vector<std::string>{"memorySlice6=1"});
  model::PublishedDevice media = type_.Publish(Device(3, 0));  // 1g.5gb+me
  EXPECT_EQ(media.attributes["profile"], model::AttributeValue(std::string("1g.5gb+me")));
  EXPECT_EQ(media.capacity["jpegEngines"], "1");
  EXPECT_EQ(media.capacity["ofaEngines"], "1");
}

TEST_F(StaticMigTypeTest, ContainersGetTheParentGpuAndTheGiAndCiCapabilities) {
  GpuDevice device = Device(2, 1);  // 2g.10gb, GI 3, CI 0
  auto e = type_.Edits(device, edits_);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  auto parent = edits_.FullGpu(Gpu(2));
  ASSERT_TRUE(parent.ok()) << parent.status().ToString();
  // The parent GPU's nodes first, then the two capability nodes.
  ASSERT_EQ(e->device_nodes.size(), parent->device_nodes.size() + 2);
  EXPECT_EQ(e->device_nodes[0].path, "/dev/nvidia2");
  EXPECT_TRUE(std::equal(parent->device_nodes.begin(), parent->device_nodes.end(), e->device_nodes.begin()));
  const std::string caps = "/dev/nvidia-caps/nvidia-cap";
  EXPECT_EQ(e->device_nodes[e->device_nodes.size() - 2].path,
            caps + std::to_string(devices::MockDeviceLib::MigGiCapMinor(2, 3)));
  EXPECT_EQ(e->device_nodes.back().path, caps + std::to_string(devices::MockDeviceLib::MigCiCapMinor(2, 3, 0)));
  // A prepared claim's record changes nothing for a static device.
  const GpuDeviceType& as_kind_sees_it = type_;
  auto again = as_kind_sees_it.Edits(device, GpuUndo{}, edits_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *e);
}

TEST_F(StaticMigTypeTest, HoldsItsNameAndLeavesTheNodeAloneAtPrepareAndUnprepare) {
  GpuDevice device = Device(3, 1);
  EXPECT_EQ(type_.Held(device), std::vector<std::string>{"gpu-3-mig-1c3g20gb-9-4"});
  GpuUndo undo;
  ASSERT_TRUE(type_.Plan({&device}, undo).ok());
  EXPECT_EQ(undo, GpuUndo{});
  ASSERT_TRUE(type_.Apply(undo).ok());
  ASSERT_TRUE(type_.Undo("uid-1", undo).ok());
  EXPECT_EQ(undo, GpuUndo{});
  // Nothing was asked of the GPUs (the mock logs every control call).
  EXPECT_FALSE(PathExists(node_.lib->control_log_path()));
}

}  // namespace
}  // namespace nvdra::gpu
