// Device nodes under a driver root: IMEX channel nodes (fresh majors, stale
// nodes replaced, regular files only on mock roots) and the set of every
// NVIDIA node.
#include "devices/device_nodes.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>

#include "devices/mock/mock_node_fixture.h"
#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::devices {
namespace {

TEST(DeviceNodesTest, AllNvidiaNodesAreSortedAndSkipDirectoriesAndOtherDevices) {
  testing::MockNode node("gb200x4");
  const std::string dev = node.lib->driver_root().container_root() + "/dev";
  ASSERT_TRUE(WriteFileAtomically(dev + "/nvidia-nvswitch0", "").ok());
  auto all = node.Nodes().AllNvidiaNodes();
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  std::vector<std::string> paths;
  for (const auto& n : *all) paths.push_back(n.path);
  EXPECT_TRUE(std::is_sorted(paths.begin(), paths.end()));
  EXPECT_NE(std::find(paths.begin(), paths.end(), "/dev/nvidiactl"), paths.end());
  EXPECT_EQ(std::find(paths.begin(), paths.end(), "/dev/nvidia-nvswitch0"), paths.end());
  EXPECT_EQ(std::find(paths.begin(), paths.end(), "/dev/nvidia-caps"), paths.end()) << "a directory is no node";
  EXPECT_EQ(all->front().host_path, "/run/nvidia/driver" + all->front().path);
}

TEST(DeviceNodesTest, NoNodesIsNotFound) {
  ::nvdra::testing::TempDir empty;
  ASSERT_TRUE(MakeDirectories(empty.path() + "/dev").ok());
  DeviceNodes nodes(DriverRoot(empty.path(), "/"), empty.path() + "/devices", empty.path() + "/caps", true);
  EXPECT_EQ(nodes.AllNvidiaNodes().status().code(), StatusCode::kNotFound);
}

class ImexChannelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(MakeDirectories(dir_.path() + "/dev/nvidia-caps-imex-channels").ok());
    // The driver root's dev/ is the dev root (never this host's /dev).
    ASSERT_TRUE(WriteFileAtomically(dir_.path() + "/dev/nvidiactl", "").ok());
    SetMajor(235);
  }
  void SetMajor(int major) {
    ASSERT_TRUE(WriteFileAtomically(dir_.path() + "/devices",
                                    "Character devices:\n" + std::to_string(major) + " nvidia-caps-imex-channels\n")
                    .ok());
  }
  bool CanMknod() {
    std::string p = dir_.path() + "/probe";
    bool ok = ::mknod(p.c_str(), S_IFCHR | 0600, makedev(1, 3)) == 0;
    ::unlink(p.c_str());
    return ok;
  }
  std::string Channel(int id) { return dir_.path() + "/dev/nvidia-caps-imex-channels/channel" + std::to_string(id); }
  ::nvdra::testing::TempDir dir_;
};

TEST_F(ImexChannelsTest, MajorIsReadFreshEveryTime) {
  ImexChannels c(DriverRoot(dir_.path(), "/"), dir_.path() + "/devices", true);
  EXPECT_EQ(*c.Major(), 235);
  SetMajor(240);  // module reloaded, e.g. after a reboot
  EXPECT_EQ(*c.Major(), 240);
  auto n = c.ChannelNode(3);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->major, std::optional<int64_t>(240));
  EXPECT_EQ(n->minor, std::optional<int64_t>(3));
  EXPECT_EQ(n->host_path, "") << "host root / needs no hostPath";
  ASSERT_TRUE(WriteFileAtomically(dir_.path() + "/devices", "Character devices:\n195 nvidia-frontend\n").ok());
  EXPECT_EQ(c.EnsureChannel(0).code(), StatusCode::kNotFound);
}

TEST_F(ImexChannelsTest, StaleNodeFromPreviousBootIsReplaced) {
  if (!CanMknod()) GTEST_SKIP() << "mknod not permitted here";
  ASSERT_EQ(::mknod(Channel(5).c_str(), S_IFCHR | 0666, makedev(200, 5)), 0);
  ImexChannels c(DriverRoot(dir_.path(), "/"), dir_.path() + "/devices", false);
  ASSERT_TRUE(c.EnsureChannel(5).ok());
  struct stat st;
  ASSERT_EQ(::stat(Channel(5).c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(major(st.st_rdev), 235u);
  EXPECT_EQ(minor(st.st_rdev), 5u);
  // A node that is right is left alone, and a missing one is created.
  ASSERT_TRUE(c.EnsureChannel(5).ok());
  ASSERT_TRUE(c.EnsureChannel(6).ok());
  ASSERT_EQ(::stat(Channel(6).c_str(), &st), 0);
  EXPECT_EQ(minor(st.st_rdev), 6u);
}

TEST_F(ImexChannelsTest, RegularFileOnlyAcceptedForMockRoots) {
  ASSERT_TRUE(WriteFileAtomically(Channel(1), "").ok());
  ImexChannels mock(DriverRoot(dir_.path(), "/"), dir_.path() + "/devices", true);
  EXPECT_TRUE(mock.EnsureChannel(1).ok());
  ImexChannels real(DriverRoot(dir_.path(), "/"), dir_.path() + "/devices", false);
  EXPECT_EQ(real.EnsureChannel(1).code(), StatusCode::kFailedPrecondition);
}

TEST_F(ImexChannelsTest, CannotCreateIsAnError) {
  // Creation fails for anyone, root included: the directory is a file.
  ::nvdra::testing::TempDir other;
  ASSERT_TRUE(MakeDirectories(other.path() + "/dev").ok());
  ASSERT_TRUE(WriteFileAtomically(other.path() + "/dev/nvidiactl", "").ok());
  ASSERT_TRUE(WriteFileAtomically(other.path() + "/dev/nvidia-caps-imex-channels", "").ok());
  ImexChannels c(DriverRoot(other.path(), "/"), dir_.path() + "/devices", true);
  Status s = c.EnsureChannel(2);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("nvidia-caps-imex-channels"), std::string::npos) << s.ToString();
  EXPECT_FALSE(c.ChannelNode(2).ok());
}

}  // namespace
}  // namespace nvdra::devices
