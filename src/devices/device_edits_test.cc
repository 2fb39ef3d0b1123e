// CDI edits for every device kind, written through the CDI spec writer and
// pinned by golden files; device-node checks; IMEX channel nodes.
#include "util/test_paths.h"
#include "devices/device_edits.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include "cdi/cdi_spec_writer.h"
#include "cdi/testdata/golden.h"
#include "devices/mock/mock_device_lib.h"
#include "devices/published_devices.h"
#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::devices {
namespace {

const std::string kTestdata = std::string(NVDRA_SOURCE_DIR) + "/src/devices/testdata/";
const std::string kUid = "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b";

struct Fixture {
  testing::TempDir dir;
  std::unique_ptr<MockDeviceLib> lib;
  NodeInventory inv;
  // As the runtime sees it: the mock root stands for a containerised
  // driver at /run/nvidia/driver on the host.
  std::unique_ptr<DeviceEdits> edits;

  explicit Fixture(const std::string& profile) {
    auto p = LoadMockProfile(profile);
    EXPECT_TRUE(p.ok());
    auto l = MockDeviceLib::Create(*p, dir.path() + "/root");
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    lib = std::move(*l);
    inv = *lib->Discover();
    DriverRoot root(lib->driver_root().container_root(), "/run/nvidia/driver");
    edits = std::make_unique<DeviceEdits>(root, lib->proc_devices_path(), lib->capabilities_dir(), true);
    // Driver files and hooks as the GPU plugin attaches them.
    std::string version = inv.driver_version;
    edits->UseDriverFiles(std::make_shared<DriverFilesCache>(
        root, [version]() -> Result<std::string> { return version; },
        "/var/lib/kubelet/plugins/gpu.nvidia.com/nvidia-cdi-hook"));
  }
};

void WriteAndCheck(const cdi::CdiSpecWriter& writer, const std::vector<cdi::SpecDevice>& devs,
                   const cdi::ContainerEdits& common, const std::string& golden) {
  cdi::Spec spec = writer.BuildClaimSpec(kUid, devs, common);
  Status s = writer.WriteClaimSpec(kUid, spec);
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto content = ReadFileToString(*writer.ClaimSpecPath(kUid));
  ASSERT_TRUE(content.ok());
  testing::ExpectMatchesGolden(kTestdata + golden, *content);
  auto j = nlohmann::json::parse(*content);
  EXPECT_EQ(j["cdiVersion"], "0.5.0");
  YAML::Node y = YAML::Load(*content);
  EXPECT_EQ(y["devices"].size(), devs.size());
}

TEST(DeviceEditsTest, FullGpuClaimSpec) {
  Fixture f("h100x8");
  auto common = f.edits->CommonGpuEdits();
  ASSERT_TRUE(common.ok()) << common.status().ToString();
  ASSERT_EQ(common->device_nodes.size(), 4u);
  EXPECT_EQ(common->device_nodes[0].path, "/dev/nvidiactl");
  EXPECT_EQ(common->device_nodes[3].path, "/dev/nvidia-modeset");
  EXPECT_EQ(common->hooks.size(), 4u);
  EXPECT_EQ(common->mounts.front().host_path,
            "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so.570.158.01");
  EXPECT_EQ(common->device_nodes[0].host_path, "/run/nvidia/driver/dev/nvidiactl");
  auto g0 = f.edits->GpuEdits(f.inv.gpus[0]);
  auto g5 = f.edits->GpuEdits(f.inv.gpus[5]);
  ASSERT_TRUE(g0.ok() && g5.ok());
  cdi::CdiSpecWriter w(f.dir.path() + "/cdi", "k8s.gpu.nvidia.com");
  WriteAndCheck(w, {{"gpu-5", *g5}, {"gpu-0", *g0}}, *common, "cdi-gpu-claim.json");
  EXPECT_EQ(w.DeviceId(kUid, "gpu-0"), "k8s.gpu.nvidia.com/claim=" + kUid + "-gpu-0");
}

TEST(DeviceEditsTest, MigClaimSpec) {
  Fixture f("a100-mig");
  auto common = f.edits->CommonGpuEdits();
  ASSERT_TRUE(common.ok());
  const MigDeviceInfo& m = f.inv.gpus[2].migs[2];  // 1g.5gb, gi 9
  auto e = f.edits->MigEdits(m);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ASSERT_EQ(e->device_nodes.size(), 3u);
  EXPECT_EQ(e->device_nodes[0].path, "/dev/nvidia2");
  const auto& gi = e->device_nodes[1];
  EXPECT_EQ(gi.path, "/dev/nvidia-caps/nvidia-cap" + std::to_string(MockDeviceLib::MigGiCapMinor(2, 9)));
  EXPECT_EQ(gi.type, "c");
  EXPECT_EQ(gi.major, std::optional<int64_t>(kMockCapsMajor));
  EXPECT_EQ(gi.file_mode, std::optional<uint32_t>(0444));
  cdi::CdiSpecWriter w(f.dir.path() + "/cdi", "k8s.gpu.nvidia.com");
  WriteAndCheck(w, {{MigDeviceName(m), *e}}, *common, "cdi-mig-claim.json");
}

TEST(DeviceEditsTest, ImexChannelAndDaemonClaimSpecs) {
  Fixture f("gb200x4");
  auto ch = f.edits->ImexChannelEdits(0);
  ASSERT_TRUE(ch.ok()) << ch.status().ToString();
  const auto& n = ch->device_nodes.at(0);
  EXPECT_EQ(n.path, "/dev/nvidia-caps-imex-channels/channel0");
  EXPECT_EQ(n.type, "c");
  EXPECT_EQ(n.major, std::optional<int64_t>(kMockImexChannelsMajor));
  EXPECT_EQ(n.minor, std::optional<int64_t>(0));
  EXPECT_EQ(n.file_mode, std::optional<uint32_t>(0666));
  cdi::CdiSpecWriter w(f.dir.path() + "/cdi", "k8s.compute-domain.nvidia.com");
  WriteAndCheck(w, {{ImexChannelDeviceName(0), *ch}}, {}, "cdi-channel-claim.json");

  auto fabric = f.edits->FabricImexMgmtEdits();
  ASSERT_TRUE(fabric.ok()) << fabric.status().ToString();
  cdi::ContainerEdits daemon = *fabric;
  // The compute-domain kind adds its environment; shown here as it would.
  daemon.env = {"CLIQUE_ID=" + f.inv.clique_id};
  const std::string uid2 = "7a1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b";
  cdi::Spec spec = w.BuildClaimSpec(uid2, {{kDaemonDeviceName, daemon}});
  ASSERT_TRUE(w.WriteClaimSpec(uid2, spec).ok());
  testing::ExpectMatchesGolden(kTestdata + "cdi-daemon-claim.json", *ReadFileToString(*w.ClaimSpecPath(uid2)));
}

TEST(DeviceEditsTest, NewChannelBeyondPrecreatedOnesIsCreated) {
  Fixture f("gb200x4");
  const std::string path = f.lib->driver_root().container_root() + "/dev/nvidia-caps-imex-channels/channel100";
  EXPECT_FALSE(PathExists(path));
  auto ch = f.edits->ImexChannelEdits(100);
  ASSERT_TRUE(ch.ok()) << ch.status().ToString();
  EXPECT_TRUE(PathExists(path));
  EXPECT_EQ(ch->device_nodes[0].minor, std::optional<int64_t>(100));
  EXPECT_FALSE(f.edits->ImexChannelEdits(kMaxImexChannels).ok());
  EXPECT_FALSE(f.edits->ImexChannelEdits(-1).ok());
}

TEST(DeviceEditsTest, MissingDeviceNodeFailsWithActionableError) {
  Fixture f("h100x8");
  ASSERT_EQ(::unlink((f.lib->driver_root().container_root() + "/dev/nvidia3").c_str()), 0);
  auto e = f.edits->GpuEdits(f.inv.gpus[3]);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(e.status().message().find("/dev/nvidia3"), std::string::npos);
  EXPECT_NE(e.status().message().find("nvidia-modprobe"), std::string::npos);
  ASSERT_EQ(::unlink((f.lib->driver_root().container_root() + "/dev/nvidiactl").c_str()), 0);
  EXPECT_FALSE(f.edits->CommonGpuEdits().ok());
}

TEST(DeviceEditsTest, ComputeDomainBaseSpecHasTheManagementDeviceAndTheDriver) {
  Fixture f("gb200x4");
  auto spec = f.edits->BaseSpec("k8s.compute-domain.nvidia.com");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->kind, "k8s.compute-domain.nvidia.com/device");
  ASSERT_EQ(spec->devices.size(), 1u);
  EXPECT_EQ(spec->devices[0].name, "all");
  std::vector<std::string> paths;
  for (const auto& n : spec->devices[0].edits.device_nodes) paths.push_back(n.path);
  for (const char* want : {"/dev/nvidia0", "/dev/nvidia3", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-modeset",
                           "/dev/nvidia-caps/nvidia-cap1", "/dev/nvidia-caps-imex-channels/channel0"}) {
    EXPECT_NE(std::find(paths.begin(), paths.end(), want), paths.end()) << want;
  }
  EXPECT_EQ(std::find(paths.begin(), paths.end(), "/dev/nvidia-caps"), paths.end()) << "a directory is no node";
  EXPECT_EQ(spec->edits.env.back(), "NVIDIA_VISIBLE_DEVICES=void");
  EXPECT_EQ(spec->edits.hooks.size(), 4u);
  EXPECT_FALSE(spec->edits.mounts.empty());
  EXPECT_TRUE(cdi::ValidateSpec(*spec).ok());
  EXPECT_EQ(cdi::MinimumVersion(*spec), "0.5.0");  // hostPath under /run/nvidia/driver
}

TEST(DeviceEditsTest, UvmNodesAreOptional) {
  Fixture f("h100x8");
  ASSERT_EQ(::unlink((f.lib->driver_root().container_root() + "/dev/nvidia-uvm-tools").c_str()), 0);
  auto common = f.edits->CommonGpuEdits();
  ASSERT_TRUE(common.ok());
  EXPECT_EQ(common->device_nodes.size(), 3u);
}

TEST(DeviceEditsTest, RegularFileIsNotANodeOnRealHardware) {
  Fixture f("h100x8");
  const std::string node = f.lib->driver_root().container_root() + "/dev/nvidia0";
  ASSERT_EQ(::unlink(node.c_str()), 0);
  ASSERT_TRUE(WriteFileAtomically(node, "").ok());
  DeviceEdits strict(f.lib->driver_root(), f.lib->proc_devices_path(), f.lib->capabilities_dir(), false);
  EXPECT_EQ(strict.GpuEdits(f.inv.gpus[0]).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(f.edits->GpuEdits(f.inv.gpus[0]).ok()) << "a mock root may hold regular files";
}

TEST(DeviceEditsTest, MissingCapsMajorFailsMig) {
  Fixture f("a100-mig");
  ASSERT_TRUE(WriteFileAtomically(f.lib->proc_devices_path(), "Character devices:\n195 nvidia-frontend\n").ok());
  auto e = f.edits->MigEdits(f.inv.gpus[2].migs[0]);
  EXPECT_EQ(e.status().code(), StatusCode::kNotFound);
  EXPECT_NE(e.status().message().find("nvidia-caps"), std::string::npos);
}

class ImexChannelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(MakeDirectories(dir_.path() + "/dev/nvidia-caps-imex-channels").ok());
    SetMajor(235);
  }
  void SetMajor(int major) {
    ASSERT_TRUE(WriteFileAtomically(dir_.path() + "/devices", "Character devices:\n" + std::to_string(major) +
                                                                  " nvidia-caps-imex-channels\n").ok());
  }
  bool CanMknod() {
    std::string p = dir_.path() + "/probe";
    bool ok = ::mknod(p.c_str(), S_IFCHR | 0600, makedev(1, 3)) == 0;
    ::unlink(p.c_str());
    return ok;
  }
  std::string Channel(int id) { return dir_.path() + "/dev/nvidia-caps-imex-channels/channel" + std::to_string(id); }
  testing::TempDir dir_;
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
  testing::TempDir other;
  ASSERT_TRUE(MakeDirectories(other.path() + "/dev").ok());
  ASSERT_TRUE(WriteFileAtomically(other.path() + "/dev/nvidia-caps-imex-channels", "").ok());
  ImexChannels c(DriverRoot(other.path(), "/"), dir_.path() + "/devices", true);
  Status s = c.EnsureChannel(2);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("nvidia-caps-imex-channels"), std::string::npos) << s.ToString();
  EXPECT_FALSE(c.ChannelNode(2).ok());
}

}  // namespace
}  // namespace nvdra::devices
