#include "devices/mock/mock_device_lib.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>

#include "devices/backends/open_device_lib.h"
#include "devices/mock/mock_driver_install.h"
#include "devices/nvcaps.h"
#include "devices/proc_devices.h"
#include "util/file_util.h"
#include "util/mutex.h"
#include "util/test_temp_dir.h"

namespace nvdra::devices {
namespace {

Result<std::unique_ptr<DeviceLib>> OpenMock(const std::string& profile, const std::string& root,
                                            const std::string& extra_xids = "") {
  DeviceLibOptions o;
  o.mock_hardware = profile;
  o.mock_root = root;
  o.additional_xids_to_ignore = extra_xids;
  return OpenDeviceLib(o);
}

bool IsNode(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && (S_ISCHR(st.st_mode) || S_ISREG(st.st_mode));
}

TEST(MockDeviceLibTest, SwapsTheDriverWhileALibIsOpen) {
  nvdra::testing::TempDir t;
  const std::string r = t.path() + "/mock";
  auto lib = OpenMock("h100x8", r);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  auto profile = LoadMockProfile("h100x8");
  ASSERT_TRUE(profile.ok());
  const std::string a = profile->inventory.driver_version;
  const std::string lib_dir = r + kMockLibDir;
  EXPECT_TRUE(PathExists(lib_dir + "/libcuda.so." + a));
  EXPECT_NE(ReadFileToString((*lib)->driver_version_file())->find("Kernel Module  " + a + " "), std::string::npos);

  // Gone: files and version file removed, discovery answers as NVML does,
  // and a discovery meanwhile puts nothing back.
  ASSERT_TRUE(SwapMockDriver(r, MockLayout::kPlain, *profile, kMockDriverGone).ok());
  auto gone = (*lib)->Discover();
  ASSERT_FALSE(gone.ok());
  EXPECT_TRUE(gone.status().retryable());
  EXPECT_NE(gone.status().message().find("NVML_ERROR_DRIVER_NOT_LOADED"), std::string::npos);
  EXPECT_FALSE(PathExists(lib_dir + "/libcuda.so." + a));
  EXPECT_FALSE(PathExists(lib_dir + "/libcuda.so.1"));
  EXPECT_FALSE(PathExists((*lib)->driver_version_file()));

  // Back with another version: its files, its version file, its inventory.
  ASSERT_TRUE(SwapMockDriver(r, MockLayout::kPlain, *profile, "580.65.06").ok());
  auto back = (*lib)->Discover();
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->driver_version, "580.65.06");
  EXPECT_EQ(back->gpus[0].driver_version, "580.65.06");
  EXPECT_TRUE(PathExists(lib_dir + "/libcuda.so.580.65.06"));
  EXPECT_FALSE(PathExists(lib_dir + "/libcuda.so." + a));
  EXPECT_NE(ReadFileToString((*lib)->driver_version_file())->find("580.65.06"), std::string::npos);

  // A direct swap unloads the running version first.
  ASSERT_TRUE(SwapMockDriver(r, MockLayout::kPlain, *profile, a).ok());
  EXPECT_EQ((*lib)->Discover()->driver_version, a);
  EXPECT_FALSE(PathExists(lib_dir + "/libcuda.so.580.65.06"));
}

TEST(MockDeviceLibTest, SwapInTheGpuOperatorLayoutTakesTheMarkerAway) {
  nvdra::testing::TempDir t;
  const std::string r = t.path() + "/node";
  DeviceLibOptions o;
  o.mock_hardware = "h100x8";
  o.mock_root = r;
  o.mock_layout = "gpu-operator";
  auto lib = OpenDeviceLib(o);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  auto profile = LoadMockProfile("h100x8");
  const std::string marker = (*lib)->driver_ready_marker();
  ASSERT_EQ(marker, r + kGpuOperatorDriverReady);
  EXPECT_TRUE(PathExists(marker));
  ASSERT_TRUE(SwapMockDriver(r, MockLayout::kGpuOperator, *profile, kMockDriverGone).ok());
  EXPECT_FALSE(PathExists(marker));
  EXPECT_FALSE(PathExists(r + kGpuOperatorDriverRoot + kMockLibDir + "/libcuda.so." +
                          profile->inventory.driver_version));
  ASSERT_TRUE(SwapMockDriver(r, MockLayout::kGpuOperator, *profile, "580.65.06").ok());
  EXPECT_TRUE(PathExists(marker));
  EXPECT_TRUE(PathExists(r + kGpuOperatorDriverRoot + kMockLibDir + "/libcuda.so.580.65.06"));
}

// The channels' major goes with the module: none listed while the driver is
// gone, the one the new module registered after; the node under dev/ stays.
TEST(MockDeviceLibTest, SwapMayGiveTheImexChannelsAnotherMajor) {
  nvdra::testing::TempDir t;
  const std::string r = t.path() + "/mock";
  auto lib = OpenMock("gb200x4", r);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  auto profile = LoadMockProfile("gb200x4");
  ASSERT_TRUE(profile.ok());
  const std::string proc = (*lib)->proc_devices_path();
  ASSERT_TRUE(SwapMockDriver(r, MockLayout::kPlain, *profile, kMockDriverGone).ok());
  EXPECT_EQ(ReadCharDeviceMajor(proc, "nvidia-caps-imex-channels").status().code(), StatusCode::kNotFound);
  EXPECT_FALSE((*lib)->Discover().ok());
  EXPECT_EQ(ReadCharDeviceMajor(proc, "nvidia-caps-imex-channels").status().code(), StatusCode::kNotFound)
      << "a discovery while the driver is gone lists no channels";
  ASSERT_TRUE(SwapMockDriver(r, MockLayout::kPlain, *profile, "580.65.06", 241).ok());
  ASSERT_TRUE((*lib)->Discover().ok());
  EXPECT_EQ(*ReadCharDeviceMajor(proc, "nvidia-caps-imex-channels"), 241);
  EXPECT_EQ(MockImexChannelsMajorNow(r), 241);
  EXPECT_TRUE(IsNode(r + "/dev/nvidia-caps-imex-channels/channel0"));
  if (::geteuid() == 0) {
    struct stat st;
    ASSERT_EQ(::stat((r + "/dev/nvidia-caps-imex-channels/channel0").c_str(), &st), 0);
    EXPECT_EQ(major(st.st_rdev), static_cast<unsigned>(kMockImexChannelsMajor)) << "the old node is stale now";
  }
}

TEST(MockDeviceLibTest, BuildsFakeDriverRoot) {
  nvdra::testing::TempDir t;
  auto lib = OpenMock("gb200x4", t.path() + "/mock");
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  const std::string r = t.path() + "/mock";
  for (const char* p : {"/dev/nvidia0", "/dev/nvidia3", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                        "/dev/nvidia-caps/nvidia-cap1", "/dev/nvidia-caps-imex-channels/channel0",
                        "/dev/nvidia-caps-imex-channels/channel7"}) {
    EXPECT_TRUE(IsNode(r + p)) << p;
  }
  EXPECT_FALSE(IsNode(r + "/dev/nvidia4"));
  EXPECT_FALSE(IsNode(r + "/dev/nvidia-caps-imex-channels/channel8"));
  EXPECT_EQ(*ReadCharDeviceMajor((*lib)->proc_devices_path(), "nvidia-caps-imex-channels"), kMockImexChannelsMajor);
  EXPECT_EQ(*ReadCharDeviceMajor((*lib)->proc_devices_path(), "nvidia-caps"), kMockCapsMajor);
  auto fabric = ReadNvcapAccess((*lib)->capabilities_dir() + "/fabric-imex-mgmt");
  ASSERT_TRUE(fabric.ok()) << fabric.status().ToString();
  EXPECT_EQ(fabric->minor, 1);
  EXPECT_EQ((*lib)->driver_root().ContainerDevRoot(), r);
  EXPECT_EQ((*lib)->driver_root().HostDevPath("/dev/nvidia0"), r + "/dev/nvidia0");
  EXPECT_TRUE((*lib)->device_nodes_may_be_files());
  EXPECT_EQ((*lib)->backend_name(), "mock:gb200x4");
}

// The GPU operator's node: the driver container's files under
// run/nvidia/driver, the device nodes on the node's dev/, the toolkit's hook
// in usr/local/nvidia/toolkit, the validator's marker.
TEST(MockDeviceLibTest, GpuOperatorLayout) {
  nvdra::testing::TempDir t;
  const std::string node = t.path() + "/node", drv = node + "/run/nvidia/driver";
  DeviceLibOptions o;
  o.mock_hardware = "gb200x4";
  o.mock_root = node;
  o.mock_layout = "gpu-operator";
  o.container_driver_root = t.path() + "/no-such-mount";
  o.host_driver_root = "/run/nvidia/driver";
  auto lib = OpenDeviceLib(o);
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  for (const char* p : {"/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-modeset", "/dev/dri/card1",
                        "/dev/nvidia-caps-imex-channels/channel0"}) {
    EXPECT_TRUE(IsNode(node + p)) << p;
    EXPECT_FALSE(PathExists(drv + p)) << p;
  }
  for (const char* p : {"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                        "/usr/bin/nvidia-smi", "/etc/ld.so.cache", "/lib/firmware/nvidia/570.158.01/gsp_ga10x.bin"}) {
    EXPECT_TRUE(PathExists(drv + p)) << p;
    EXPECT_FALSE(PathExists(node + p)) << p;
  }
  EXPECT_TRUE(std::filesystem::is_directory(drv + "/dev")) << "a container image's own /dev";
  EXPECT_FALSE(PathExists(node + "/usr/bin/nvidia-cdi-hook"));
  EXPECT_FALSE(PathExists(drv + "/usr/bin/nvidia-cdi-hook"));
  // No toolkit hook either: the plugins copy the nvdra-cdi-hook beside them.
  EXPECT_FALSE(PathExists(node + "/usr/local/nvidia/toolkit/nvidia-cdi-hook"));
  EXPECT_EQ((*lib)->cdi_hook_source().substr((*lib)->cdi_hook_source().rfind('/')), "/nvdra-cdi-hook");
  auto ready = ReadFileToString(node + "/run/nvidia/validations/driver-ready");
  ASSERT_TRUE(ready.ok()) << ready.status().ToString();
  EXPECT_NE(ready->find("NVIDIA_DRIVER_ROOT=/run/nvidia/driver\n"), std::string::npos) << *ready;
  EXPECT_NE(ready->find("IS_HOST_DRIVER=false\n"), std::string::npos) << *ready;
  // No mount of the driver root where --container-driver-root says: the
  // node's directory is both views.
  EXPECT_EQ((*lib)->driver_root().container_root(), drv);
  EXPECT_EQ((*lib)->driver_root().host_root(), drv);
  EXPECT_EQ((*lib)->driver_root().ContainerDevRoot(), node);
  EXPECT_EQ((*lib)->driver_root().HostDevPath("/dev/nvidia0"), node + "/dev/nvidia0");
  EXPECT_EQ((*lib)->proc_devices_path(), node + "/proc/devices");
  auto inv = (*lib)->Discover();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->gpus.size(), 4u);

  // A plugin container's view of it: the driver root mounted elsewhere (a
  // link stands in for the mount), seen by the host at --nvidia-driver-root.
  ASSERT_EQ(::symlink(drv.c_str(), (t.path() + "/driver-root").c_str()), 0);
  o.container_driver_root = t.path() + "/driver-root";
  auto mounted = OpenDeviceLib(o);
  ASSERT_TRUE(mounted.ok()) << mounted.status().ToString();
  EXPECT_EQ((*mounted)->driver_root().container_root(), t.path() + "/driver-root");
  EXPECT_EQ((*mounted)->driver_root().host_root(), "/run/nvidia/driver");
  EXPECT_EQ((*mounted)->driver_root().HostDevPath("/dev/nvidia0"), node + "/dev/nvidia0");

  o.mock_layout = "flat";
  EXPECT_EQ(OpenDeviceLib(o).status().code(), StatusCode::kInvalidArgument);
}

TEST(MockDeviceLibTest, MigCapabilityFilesMatchProfile) {
  nvdra::testing::TempDir t;
  auto lib = OpenMock("a100-mig", t.path());
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  auto inv = (*lib)->Discover();
  ASSERT_TRUE(inv.ok());
  for (const auto& g : inv->gpus) {
    for (const auto& m : g.migs) {
      auto gi = ReadNvcapAccess((*lib)->capabilities_dir() + "/" + MigGiAccessPath(g.minor, m.gi_id));
      auto ci = ReadNvcapAccess((*lib)->capabilities_dir() + "/" + MigCiAccessPath(g.minor, m.gi_id, m.ci_id));
      ASSERT_TRUE(gi.ok() && ci.ok()) << m.uuid;
      EXPECT_EQ(gi->minor, MockDeviceLib::MigGiCapMinor(g.minor, m.gi_id));
      EXPECT_EQ(ci->minor, MockDeviceLib::MigCiCapMinor(g.minor, m.gi_id, m.ci_id));
      EXPECT_TRUE(IsNode(t.path() + "/dev/nvidia-caps/nvidia-cap" + std::to_string(ci->minor)));
    }
  }
  // No clique in this profile: no fabric capability.
  EXPECT_FALSE(PathExists((*lib)->capabilities_dir() + "/fabric-imex-mgmt"));
  EXPECT_EQ(inv->clique_id, "");
}

TEST(MockDeviceLibTest, DiscoverIsStableAndRebuildsAWipedRoot) {
  nvdra::testing::TempDir t;
  auto lib = OpenMock("h100x8", t.path() + "/m");
  ASSERT_TRUE(lib.ok());
  auto a = (*lib)->Discover();
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->gpus[0].pcie_root, std::optional<std::string>("pci0000:15")) << "read back from the fake sysfs";
  std::filesystem::remove_all(t.path() + "/m");
  auto b = (*lib)->Discover();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(*a, *b);
  EXPECT_TRUE(IsNode(t.path() + "/m/dev/nvidia7"));
  // A second instance over the same root sees the same hardware.
  auto lib2 = OpenMock("h100x8", t.path() + "/m");
  ASSERT_TRUE(lib2.ok());
  EXPECT_EQ(*(*lib2)->Discover(), *a);
}

TEST(MockDeviceLibTest, OpenErrors) {
  nvdra::testing::TempDir t;
  EXPECT_EQ(OpenMock("nope", t.path()).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(OpenMock("h100x8", "relative/dir").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenMock("h100x8", "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenMock("h100x8", t.path(), "x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenMock(t.path() + "/missing.json", t.path()).status().code(), StatusCode::kNotFound);
}

TEST(MockDeviceLibTest, ProfileFromFile) {
  nvdra::testing::TempDir t;
  std::string file = t.path() + "/l40s.json";
  ASSERT_TRUE(WriteFileAtomically(file, R"({
    "driverVersion": "560.35.03", "cudaDriverVersion": "12.6",
    "gpus": [{"count": 2, "productName": "NVIDIA L40S", "brand": "Nvidia", "architecture": "Ada Lovelace",
              "cudaComputeCapability": "8.9", "memoryBytes": 48305799168}]})")
                  .ok());
  auto lib = OpenMock(file, t.path() + "/root");
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  auto inv = (*lib)->Discover();
  ASSERT_TRUE(inv.ok());
  ASSERT_EQ(inv->gpus.size(), 2u);
  EXPECT_EQ(inv->gpus[1].product_name, "NVIDIA L40S");
  EXPECT_FALSE(inv->gpus[1].pcie_root.has_value());
}

TEST(MockDeviceLibTest, ControlCallsAreRecorded) {
  nvdra::testing::TempDir t;
  auto profile = LoadMockProfile("h100x8");
  ASSERT_TRUE(profile.ok());
  auto lib = MockDeviceLib::Create(*profile, t.path());
  ASSERT_TRUE(lib.ok());
  const std::string uuid = (*lib)->profile().inventory.gpus[3].uuid;
  ASSERT_TRUE((*lib)->control().SetTimeSlice(uuid, 3).ok());
  ASSERT_TRUE((*lib)->control().SetComputeMode(uuid, "EXCLUSIVE_PROCESS").ok());
  EXPECT_EQ((*lib)->control().SetTimeSlice("GPU-unknown", 1).code(), StatusCode::kNotFound);
  EXPECT_EQ((*lib)->control().SetTimeSlice(uuid, 9).code(), StatusCode::kInvalidArgument);
  auto log = ReadFileToString((*lib)->control_log_path());
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(*log, "SetTimeSlice " + uuid + " 3\nSetComputeMode " + uuid + " EXCLUSIVE_PROCESS\n");
}

TEST(MockDeviceLibTest, InjectedHealthEvents) {
  nvdra::testing::TempDir t;
  auto lib = OpenMock("a100-mig", t.path(), "48");
  ASSERT_TRUE(lib.ok());
  auto inv = (*lib)->Discover();
  ASSERT_TRUE(inv.ok());
  auto* mock = static_cast<MockDeviceLib*>(lib->get());
  MockHealthSource source(mock->health_events_path(), *XidPolicy::WithAdditional("48"));
  std::vector<std::string> got;
  source.Register(*inv, [&](const DeviceHealthEvent& e) {
    got.push_back(e.device + " " + HealthStateName(e.state) + " " + e.message);
  });
  ASSERT_TRUE(WriteFileAtomically(mock->health_events_path(),
                                  "gpu-0 79\n# comment\ngpu-1 48\ngpu-3 lost\ngarbage\ngpu-0 unmonitored\ngpu-1 7")
                  .ok());
  ASSERT_TRUE(source.PollOnce().ok());
  EXPECT_EQ(got, (std::vector<std::string>{
                     "gpu-0 Unhealthy XID 79 (critical)",
                     "gpu-1 Notice XID 48 (ignored)",
                     "gpu-3-mig-1g5gb-me-20-0 Unhealthy GPU lost",
                     "gpu-3-mig-1c3g20gb-9-4 Unhealthy GPU lost",
                     "gpu-0 Unmonitored health events not available",
                 }))
      << "the incomplete last line waits";
  got.clear();
  ASSERT_TRUE(source.PollOnce().ok());
  EXPECT_TRUE(got.empty()) << "lines are handled once";
  // Appending completes the last line.
  auto text = *ReadFileToString(mock->health_events_path());
  ASSERT_TRUE(WriteFileAtomically(mock->health_events_path(), text + "9\n").ok());
  ASSERT_TRUE(source.PollOnce().ok());
  EXPECT_EQ(got, (std::vector<std::string>{"gpu-1 Unhealthy XID 79 (critical)"}));
}

TEST(MockDeviceLibTest, HealthSourceThreadStartsAndStops) {
  nvdra::testing::TempDir t;
  auto lib = OpenMock("h100x8", t.path());
  ASSERT_TRUE(lib.ok());
  auto* mock = static_cast<MockDeviceLib*>(lib->get());
  ASSERT_TRUE(WriteFileAtomically(mock->health_events_path(), "gpu-2 31\n").ok());
  auto source = (*lib)->NewHealthSource();
  std::vector<DeviceHealthEvent> got;
  Mutex mu;
  ASSERT_TRUE(source
                  ->Start(*(*lib)->Discover(),
                          [&](const DeviceHealthEvent& e) {
                            MutexLock l(mu);
                            got.push_back(e);
                          })
                  .ok());
  // Start handles what is already there before returning.
  {
    MutexLock l(mu);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].device, "gpu-2");
    EXPECT_EQ(got[0].xid, std::optional<uint64_t>(31));
    EXPECT_EQ(got[0].state, HealthState::kNotice) << "an ignored XID leaves the health as it was";
  }
  source->Stop();
  source->Stop();
}

}  // namespace
}  // namespace nvdra::devices
