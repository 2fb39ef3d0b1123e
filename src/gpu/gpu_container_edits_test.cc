// What GPU and MIG claims' containers get, written through the CDI spec
// writer and pinned by golden files; missing and wrong device nodes.
#include "gpu/gpu_container_edits.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "cdi/cdi_spec_writer.h"
#include "cdi/testdata/claim_spec_golden.h"
#include "cdi/testdata/golden.h"
#include "devices/device_names.h"
#include "devices/mock/mock_node_fixture.h"
#include "gpu/mig_edits.h"
#include "util/file_util.h"
#include "util/test_paths.h"

namespace nvdra::gpu {
namespace {

const std::string kTestdata = std::string(NVDRA_SOURCE_DIR) + "/src/gpu/testdata/";
const std::string kUid = "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b";

struct Node : devices::testing::MockNode {
  GpuContainerEdits edits;
  explicit Node(const std::string& profile) : MockNode(profile), edits({Nodes(), DriverFiles()}) {}
};

void WriteAndCheck(const cdi::CdiSpecWriter& writer, const std::vector<cdi::SpecDevice>& devs,
                   const cdi::ContainerEdits& common, const std::string& golden) {
  nvdra::testing::ExpectClaimSpecMatchesGolden(writer, kUid, devs, common, kTestdata + golden);
}

TEST(GpuContainerEditsTest, FullGpuClaimSpec) {
  Node f("h100x8");
  auto common = f.edits.Common();
  ASSERT_TRUE(common.ok()) << common.status().ToString();
  ASSERT_EQ(common->device_nodes.size(), 4u);
  EXPECT_EQ(common->device_nodes[0].path, "/dev/nvidiactl");
  EXPECT_EQ(common->device_nodes[3].path, "/dev/nvidia-modeset");
  // The mock's libnvidia-allocator brings the GBM link's hook.
  EXPECT_EQ(common->hooks.size(), 5u);
  // Last, as the toolkit's common edits end.
  ASSERT_FALSE(common->env.empty());
  EXPECT_EQ(common->env.back(), "NVIDIA_VISIBLE_DEVICES=void");
  EXPECT_EQ(common->mounts.front().host_path, "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so.570.158.01");
  EXPECT_EQ(common->device_nodes[0].host_path, "/run/nvidia/driver/dev/nvidiactl");
  auto g0 = f.edits.FullGpu(f.inv.gpus[0]);
  auto g5 = f.edits.FullGpu(f.inv.gpus[5]);
  ASSERT_TRUE(g0.ok() && g5.ok());
  cdi::CdiSpecWriter w(f.dir.path() + "/cdi", "k8s.gpu.nvidia.com");
  WriteAndCheck(w, {{"gpu-5", *g5}, {"gpu-0", *g0}}, *common, "cdi-gpu-claim.json");
  EXPECT_EQ(w.DeviceId(kUid, "gpu-0"), "k8s.gpu.nvidia.com/claim=" + kUid + "-gpu-0");
}

TEST(GpuContainerEditsTest, MigClaimSpec) {
  Node f("a100-mig");
  auto common = f.edits.Common();
  ASSERT_TRUE(common.ok());
  const devices::MigDeviceInfo& m = f.inv.gpus[2].migs[2];  // 1g.5gb, gi 9
  auto e = MigEdits(f.edits, m);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ASSERT_EQ(e->device_nodes.size(), 3u);
  EXPECT_EQ(e->device_nodes[0].path, "/dev/nvidia2");
  const auto& gi = e->device_nodes[1];
  EXPECT_EQ(gi.path, "/dev/nvidia-caps/nvidia-cap" + std::to_string(devices::MockDeviceLib::MigGiCapMinor(2, 9)));
  EXPECT_EQ(gi.type, "c");
  EXPECT_EQ(gi.major, std::optional<int64_t>(devices::kMockCapsMajor));
  EXPECT_EQ(gi.file_mode, std::optional<uint32_t>(0444));
  cdi::CdiSpecWriter w(f.dir.path() + "/cdi", "k8s.gpu.nvidia.com");
  WriteAndCheck(w, {{devices::MigDeviceName(m), *e}}, *common, "cdi-mig-claim.json");
}

TEST(GpuContainerEditsTest, MissingDeviceNodeFailsWithActionableError) {
  Node f("h100x8");
  ASSERT_EQ(::unlink((f.lib->driver_root().container_root() + "/dev/nvidia3").c_str()), 0);
  auto e = f.edits.FullGpu(f.inv.gpus[3]);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(e.status().message().find("/dev/nvidia3"), std::string::npos);
  EXPECT_NE(e.status().message().find("nvidia-modprobe"), std::string::npos);
  ASSERT_EQ(::unlink((f.lib->driver_root().container_root() + "/dev/nvidiactl").c_str()), 0);
  EXPECT_FALSE(f.edits.Common().ok());
}

TEST(GpuContainerEditsTest, UvmNodesAreOptional) {
  Node f("h100x8");
  ASSERT_EQ(::unlink((f.lib->driver_root().container_root() + "/dev/nvidia-uvm-tools").c_str()), 0);
  auto common = f.edits.Common();
  ASSERT_TRUE(common.ok());
  EXPECT_EQ(common->device_nodes.size(), 3u);
}

TEST(GpuContainerEditsTest, RegularFileIsNotANodeOnRealHardware) {
  Node f("h100x8");
  const std::string node = f.lib->driver_root().container_root() + "/dev/nvidia0";
  ASSERT_EQ(::unlink(node.c_str()), 0);
  ASSERT_TRUE(WriteFileAtomically(node, "").ok());
  GpuContainerEdits strict({devices::DeviceNodes(f.lib->driver_root(), f.lib->proc_devices_path(),
                                                 f.lib->capabilities_dir(), false),
                            nullptr});
  EXPECT_EQ(strict.FullGpu(f.inv.gpus[0]).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(f.edits.FullGpu(f.inv.gpus[0]).ok()) << "a mock root may hold regular files";
}

TEST(GpuContainerEditsTest, MissingCapsMajorFailsMig) {
  Node f("a100-mig");
  ASSERT_TRUE(WriteFileAtomically(f.lib->proc_devices_path(), "Character devices:\n195 nvidia-frontend\n").ok());
  auto e = MigEdits(f.edits, f.inv.gpus[2].migs[0]);
  EXPECT_EQ(e.status().code(), StatusCode::kNotFound);
  EXPECT_NE(e.status().message().find("nvidia-caps"), std::string::npos);
}

}  // namespace
}  // namespace nvdra::gpu
