#include "devices/mock/mock_mig_devices.h"

#include <gtest/gtest.h>

#include "devices/backends/open_device_lib.h"
#include "devices/mock/mock_device_lib.h"
#include "devices/mock/mock_profile.h"
#include "devices/nvcaps.h"
#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::devices {
namespace {

std::unique_ptr<DeviceLib> OpenDynamicMig(const std::string& root) {
  DeviceLibOptions o;
  o.mock_hardware = "dynamic-mig";
  o.mock_root = root;
  auto lib = OpenDeviceLib(o);
  EXPECT_TRUE(lib.ok()) << lib.status().ToString();
  return lib.ok() ? std::move(lib).value() : nullptr;
}

TEST(MockMigDevicesTest, ProfileHasTheH100AndA100ProfilesAndPlacements) {
  auto p = LoadMockProfile("dynamic-mig");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->inventory.gpus.size(), 4u);
  EXPECT_FALSE(p->inventory.gpus[0].mig_enabled);
  EXPECT_TRUE(p->inventory.gpus[1].mig_enabled);
  EXPECT_EQ(p->inventory.gpus[2].architecture, "Ampere");
  EXPECT_TRUE(p->inventory.gpus[3].mig_enabled);
  EXPECT_EQ(p->inventory.gpus[3].mig_profiles[0].profile, "1g.5gb");
  const auto& profiles = p->inventory.gpus[0].mig_profiles;
  ASSERT_EQ(profiles.size(), 7u);
  EXPECT_EQ(profiles[0].profile, "1g.10gb");
  EXPECT_EQ(profiles[0].gi_profile_id, 19);
  EXPECT_EQ(profiles[0].placements.size(), 7u);
  EXPECT_EQ(profiles[0].memory_bytes, 9984ull * 1024 * 1024);
  EXPECT_EQ(profiles[4].profile, "3g.40gb");
  EXPECT_EQ(profiles[4].placements, (std::vector<MigPlacement>{{0, 4}, {4, 4}}));
  EXPECT_EQ(profiles[6].placements, (std::vector<MigPlacement>{{0, 8}}));
  EXPECT_FALSE(BuiltinMigProfiles("b200").ok());
}

TEST(MockMigDevicesTest, CreateNeedsMigModeAndRefusesOverlaps) {
  nvdra::testing::TempDir t;
  auto lib = OpenDynamicMig(t.path());
  ASSERT_NE(lib, nullptr);
  auto inv = lib->Discover();
  ASSERT_TRUE(inv.ok());
  const std::string off = inv->gpus[0].uuid;
  GpuControl& c = lib->control();
  EXPECT_FALSE(*c.MigModeEnabled(off));
  EXPECT_EQ(c.CreateMigInstance(off, 19, 0, 0).status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(c.SetMigMode(off, true).ok());
  auto a = c.CreateMigInstance(off, 9, 2, 0);  // 3g.40gb at 0: slices 0-3
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->placement_size, 4);
  EXPECT_EQ(a->gi_id, 1);
  EXPECT_EQ(c.CreateMigInstance(off, 14, 1, 2).status().code(),
            StatusCode::kAlreadyExists);  // 2g.20gb at 2: slices 2-3
  EXPECT_EQ(c.CreateMigInstance(off, 19, 0, 3).status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(c.CreateMigInstance(off, 9, 2, 2).status().code(), StatusCode::kInvalidArgument);  // no such placement
  auto b = c.CreateMigInstance(off, 19, 0, 4);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->gi_id, 2);
  EXPECT_NE(a->uuid, b->uuid);
  // The capability files the container edits read exist while the device does.
  auto gi = ReadNvcapAccess(lib->capabilities_dir() + "/" + MigGiAccessPath(0, 2));
  ASSERT_TRUE(gi.ok()) << gi.status().ToString();
  EXPECT_EQ(gi->minor, MockDeviceLib::MigGiCapMinor(0, 2));
  EXPECT_TRUE(PathExists(t.path() + "/dev/nvidia-caps/nvidia-cap" +
                         std::to_string(MockDeviceLib::MigCiCapMinor(0, 2, 0))));
  EXPECT_EQ(c.SetMigMode(off, false).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(c.DestroyMigInstance(off, 2, 0).ok());
  EXPECT_FALSE(PathExists(lib->capabilities_dir() + "/" + MigGiAccessPath(0, 2)));
  EXPECT_EQ(c.DestroyMigInstance(off, 2, 0).code(), StatusCode::kNotFound);
  EXPECT_EQ(c.ListMigInstances(off)->size(), 1u);
}

TEST(MockMigDevicesTest, MigDevicesOutliveTheProcessAndShowInDiscovery) {
  nvdra::testing::TempDir t;
  std::string on;
  {
    auto lib = OpenDynamicMig(t.path());
    ASSERT_NE(lib, nullptr);
    on = lib->Discover()->gpus[1].uuid;
    ASSERT_TRUE(lib->control().CreateMigInstance(on, 19, 0, 6).ok());
  }
  auto lib = OpenDynamicMig(t.path());
  ASSERT_NE(lib, nullptr);
  auto list = lib->control().ListMigInstances(on);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].placement_start, 6);
  auto inv = lib->Discover();
  ASSERT_TRUE(inv.ok());
  ASSERT_EQ(inv->gpus[1].migs.size(), 1u);
  EXPECT_EQ(inv->gpus[1].migs[0].profile, "1g.10gb");
  EXPECT_EQ(inv->gpus[1].migs[0].uuid, (*list)[0].uuid);
  auto log = ReadFileToString(t.path() + "/state/control.log");
  ASSERT_TRUE(log.ok());
  EXPECT_NE(log->find("CreateMigInstance " + on + " 19 6 gi 1"), std::string::npos);
}

}  // namespace
}  // namespace nvdra::devices
