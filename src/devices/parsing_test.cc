#include <gtest/gtest.h>
#include <unistd.h>

#include "devices/device_health.h"
#include "devices/device_names.h"
#include "devices/driver_root.h"
#include "devices/nvcaps.h"
#include "devices/pcie_root.h"
#include "devices/proc_devices.h"
#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::devices {
namespace {

// pcieRoot and numaNode from sysfs: the bus link and its numa_node file.
TEST(PcieTopologyTest, PcieRootAndNumaNodeFromSysfs) {
  nvdra::testing::TempDir t;
  const std::string sys = t.path() + "/sys";
  const std::string dev = sys + "/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0";
  ASSERT_TRUE(MakeDirectories(dev).ok());
  ASSERT_TRUE(MakeDirectories(sys + "/bus/pci/devices").ok());
  ASSERT_EQ(::symlink("../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0",
                      (sys + "/bus/pci/devices/0000:3b:00.0").c_str()),
            0);
  EXPECT_EQ(PcieRootForBusId(sys, "0000:3b:00.0"), std::optional<std::string>("pci0000:3a"));
  EXPECT_EQ(NumaNodeForBusId(sys, "0000:3b:00.0"), std::nullopt) << "no numa_node file";
  ASSERT_TRUE(WriteFileAtomically(dev + "/numa_node", "1\n").ok());
  EXPECT_EQ(NumaNodeForBusId(sys, "0000:3b:00.0"), std::optional<int>(1));
  ASSERT_TRUE(WriteFileAtomically(dev + "/numa_node", "-1\n").ok());
  EXPECT_EQ(NumaNodeForBusId(sys, "0000:3b:00.0"), std::nullopt) << "-1: no NUMA affinity";
  ASSERT_TRUE(WriteFileAtomically(dev + "/numa_node", "x1\n").ok());
  EXPECT_EQ(NumaNodeForBusId(sys, "0000:3b:00.0"), std::nullopt) << "not a number";
  ASSERT_TRUE(WriteFileAtomically(dev + "/numa_node", "").ok());
  EXPECT_EQ(NumaNodeForBusId(sys, "0000:3b:00.0"), std::nullopt);
  EXPECT_EQ(PcieRootForBusId(sys, "0000:3c:00.0"), std::nullopt);
  EXPECT_EQ(NumaNodeForBusId(sys, "0000:3c:00.0"), std::nullopt);
}

TEST(ProcDevicesTest, ParsesCharacterSectionOnly) {
  auto m = ParseCharDeviceMajors("Character devices:\n  1 mem\n195 nvidia-frontend\n234 nvidia-caps-imex-channels\n"
                                 "\nBlock devices:\n  7 nvidia-caps-imex-channels\n");
  EXPECT_EQ(m.at("nvidia-frontend"), 195);
  EXPECT_EQ(m.at("nvidia-caps-imex-channels"), 234);
  EXPECT_EQ(m.at("mem"), 1);
}

TEST(ProcDevicesTest, MissingNameAndFileAreErrors) {
  nvdra::testing::TempDir t;
  std::string p = t.path() + "/devices";
  ASSERT_TRUE(WriteFileAtomically(p, "Character devices:\n195 nvidia-frontend\n").ok());
  auto r = ReadCharDeviceMajor(p, "nvidia-caps");
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("nvidia-caps"), std::string::npos);
  EXPECT_FALSE(ReadCharDeviceMajor(t.path() + "/none", "x").ok());
  EXPECT_EQ(*ReadCharDeviceMajor(p, "nvidia-frontend"), 195);
}

TEST(NvcapsTest, ParsesAccessFile) {
  auto a = ParseNvcapAccess("DeviceFileMinor: 21\nDeviceFileMode: 292\nDeviceFileModify: 1\n");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->minor, 21);
  EXPECT_EQ(a->mode, 0444u);
  EXPECT_FALSE(ParseNvcapAccess("DeviceFileMode: 292\n").ok());
  EXPECT_FALSE(ParseNvcapAccess("DeviceFileMinor: x\nDeviceFileMode: 292\n").ok());
  // Out of range is an error, not an exception.
  EXPECT_FALSE(ParseNvcapAccess("DeviceFileMinor: 99999999999\nDeviceFileMode: 292\n").ok());
  EXPECT_FALSE(ParseNvcapAccess("DeviceFileMinor: 1\nDeviceFileMode: -1\n").ok());
  EXPECT_EQ(MigGiAccessPath(1, 3), "gpu1/mig/gi3/access");
  EXPECT_EQ(MigCiAccessPath(1, 3, 0), "gpu1/mig/gi3/ci0/access");
}

TEST(NamesTest, UpstreamDeviceNames) {
  EXPECT_EQ(GpuDeviceName(3), "gpu-3");
  EXPECT_EQ(ImexChannelDeviceName(0), "channel-0");
  EXPECT_EQ(CanonicalMigProfile("1g.10gb+me"), "1g10gb-me");
  EXPECT_EQ(CanonicalMigProfile("1g.24gb"), "1g24gb");
  EXPECT_EQ(CanonicalMigProfile("1c.3g.20gb"), "1c3g20gb");
  EXPECT_EQ(CanonicalMigProfile("+me+"), "me");
  MigDeviceInfo m{.parent_minor = 2, .profile = "1g.24gb", .gi_profile_id = 19, .placement_start = 0};
  EXPECT_EQ(MigDeviceName(m), "gpu-2-mig-1g24gb-19-0");  // the KEP's example
  m.profile = "1g.10gb+me";
  m.parent_minor = 0;
  EXPECT_EQ(MigDeviceName(m), "gpu-0-mig-1g10gb-me-19-0");
}

TEST(XidPolicyTest, UpstreamIgnoreListPlusFlag) {
  XidPolicy p;
  for (uint64_t x : {13, 31, 43, 45, 68, 109}) EXPECT_FALSE(p.IsCritical(x)) << x;
  EXPECT_TRUE(p.IsCritical(79));
  EXPECT_TRUE(p.IsCritical(48));
  auto q = XidPolicy::WithAdditional(" 79, 48 ,");
  ASSERT_TRUE(q.ok());
  EXPECT_FALSE(q->IsCritical(79));
  EXPECT_FALSE(q->IsCritical(48));
  EXPECT_FALSE(q->IsCritical(13));
  EXPECT_TRUE(q->IsCritical(94));
  auto bad = XidPolicy::WithAdditional("79,x1");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("x1"), std::string::npos);
}

TEST(DriverRootTest, DevRootAndHostPaths) {
  nvdra::testing::TempDir t;
  DriverRoot host("/", "/");
  EXPECT_EQ(host.ContainerDevRoot(), "/");
  EXPECT_EQ(host.ContainerDevPath("/dev/nvidia0"), "/dev/nvidia0");
  EXPECT_EQ(host.HostDevPath("/dev/nvidia0"), "");
  // A containerised driver: <root>/dev exists, with the driver's nodes.
  ASSERT_TRUE(MakeDirectories(t.path() + "/dev").ok());
  ASSERT_TRUE(WriteFileAtomically(t.path() + "/dev/nvidiactl", "").ok());
  DriverRoot ctr(t.path(), "/run/nvidia/driver/");
  EXPECT_EQ(ctr.ContainerDevRoot(), t.path());
  EXPECT_EQ(ctr.ContainerDevPath("/dev/nvidia0"), t.path() + "/dev/nvidia0");
  EXPECT_EQ(ctr.HostDevPath("/dev/nvidia0"), "/run/nvidia/driver/dev/nvidia0");
  // A driver root without dev/ uses the host's /dev.
  DriverRoot nodev(t.path() + "/nothing", "/run/nvidia/driver");
  EXPECT_EQ(nodev.ContainerDevRoot(), "/");
  EXPECT_EQ(nodev.HostDevPath("/dev/nvidia0"), "");
  // A containerised driver that the host sees at /.
  DriverRoot ctr_on_host(t.path(), "/");
  EXPECT_EQ(ctr_on_host.ContainerDevPath("/dev/nvidia0"), t.path() + "/dev/nvidia0");
  EXPECT_EQ(ctr_on_host.HostDevPath("/dev/nvidia0"), "");
  // One look holds what it found: a dev root that appears later (the driver
  // container starting) is seen by the next look, not by this one.
  DriverRoot later(t.path() + "/later", "/run/nvidia/driver");
  const DriverRoot::DevRoot before = later.LookUpDevRoot();
  ASSERT_TRUE(MakeDirectories(t.path() + "/later/dev").ok());
  ASSERT_TRUE(WriteFileAtomically(t.path() + "/later/dev/nvidiactl", "").ok());
  EXPECT_EQ(before.ContainerPath("/dev/nvidia0"), "/dev/nvidia0");
  EXPECT_EQ(before.HostPath("/dev/nvidia0"), "");
  EXPECT_EQ(later.LookUpDevRoot().ContainerPath("/dev/nvidia0"), t.path() + "/later/dev/nvidia0");
  EXPECT_EQ(later.HostDevPath("/dev/nvidia0"), "/run/nvidia/driver/dev/nvidia0");
}

// The GPU operator's node: the driver container's files under
// /run/nvidia/driver, its device nodes on the node's /dev. The node's root is
// a directory here, as the mock node's is.
TEST(DriverRootTest, DeviceNodesOnTheNodesDevWhenTheDriverRootHasNone) {
  nvdra::testing::TempDir t;
  const std::string node = t.path() + "/node", drv = node + "/run/nvidia/driver", ctr = t.path() + "/ctr";
  ASSERT_TRUE(MakeDirectories(drv + "/usr/bin").ok());
  ASSERT_TRUE(MakeDirectories(node + "/dev").ok());
  ASSERT_TRUE(MakeDirectories(ctr).ok());
  // No dev/ under the driver root: the node's.
  DriverRoot root(drv, "/run/nvidia/driver", node, "/");
  EXPECT_EQ(root.ContainerDevRoot(), node);
  EXPECT_EQ(root.ContainerDevPath("/dev/nvidia0"), node + "/dev/nvidia0");
  EXPECT_EQ(root.HostDevPath("/dev/nvidia0"), "") << "the node's /dev is the host's: no hostPath";
  // The node root as the host sees it differs (a plugin container that sees
  // the host's root elsewhere, or a test's node directory).
  DriverRoot seen(drv, drv, node, node);
  EXPECT_EQ(seen.HostDevPath("/dev/nvidia0"), node + "/dev/nvidia0");
  // An empty dev/ under the driver root (a container image's /dev) and the
  // nodes on the node's /dev: the node's.
  ASSERT_TRUE(MakeDirectories(drv + "/dev").ok());
  EXPECT_EQ(seen.ContainerDevRoot(), drv) << "neither has the control node yet: upstream's rule";
  ASSERT_TRUE(WriteFileAtomically(node + "/dev/nvidiactl", "").ok());
  EXPECT_EQ(seen.ContainerDevRoot(), node);
  EXPECT_EQ(seen.LookUpDevRoot().ContainerPath("/dev/nvidia-caps-imex-channels/channel0"),
            node + "/dev/nvidia-caps-imex-channels/channel0");
  // The driver container's own /dev with the nodes wins.
  ASSERT_TRUE(WriteFileAtomically(drv + "/dev/nvidiactl", "").ok());
  EXPECT_EQ(seen.ContainerDevRoot(), drv);
  EXPECT_EQ(seen.HostDevPath("/dev/nvidia0"), drv + "/dev/nvidia0");
  // A driver root that is the node's root has one dev/.
  DriverRoot same(node, "/", node, "/");
  EXPECT_EQ(same.ContainerDevRoot(), node);
}

TEST(DriverRootTest, MissingContainerRootNamesTheFlagAndSlash) {
  nvdra::testing::TempDir t;
  DriverRoot missing(t.path() + "/driver-root", "/");
  const std::string hint = missing.MissingRootHint();
  EXPECT_NE(hint.find("--container-driver-root (DRIVER_ROOT_CTR_PATH) is " + t.path() + "/driver-root"),
            std::string::npos)
      << hint;
  EXPECT_NE(hint.find("running on the host, pass --container-driver-root /"), std::string::npos) << hint;
  auto lib = missing.FindLibrary("libnvidia-ml.so.1");
  ASSERT_FALSE(lib.ok());
  EXPECT_NE(lib.status().message().find("pass --container-driver-root /"), std::string::npos) << lib.status().message();
  auto smi = missing.FindBinary("nvidia-smi");
  ASSERT_FALSE(smi.ok());
  EXPECT_NE(smi.status().message().find("pass --container-driver-root /"), std::string::npos) << smi.status().message();
  // A root that exists but holds no driver keeps the plain message.
  DriverRoot empty(t.path(), "/");
  EXPECT_EQ(empty.MissingRootHint(), "");
  auto none = empty.FindLibrary("libnvidia-ml.so.1");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("not found under driver root " + t.path()), std::string::npos)
      << none.status().message();
  EXPECT_EQ(none.status().message().find("pass --container-driver-root /"), std::string::npos);
}

TEST(DriverRootTest, FindsLibraryInUsualFoldersAndResolvesSymlinks) {
  nvdra::testing::TempDir t;
  ASSERT_TRUE(MakeDirectories(t.path() + "/usr/lib/x86_64-linux-gnu").ok());
  ASSERT_TRUE(WriteFileAtomically(t.path() + "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.1", "x").ok());
  ASSERT_EQ(::symlink("libnvidia-ml.so.570.1", (t.path() + "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1").c_str()), 0);
  DriverRoot r(t.path(), "/");
  auto p = r.FindLibrary("libnvidia-ml.so.1");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(*p, t.path() + "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.1");
  auto missing = DriverRoot(t.path() + "/x", "/").FindLibrary("libnvidia-ml.so.1");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("--container-driver-root"), std::string::npos);
}

}  // namespace
}  // namespace nvdra::devices
