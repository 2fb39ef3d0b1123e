// Runs the nvdra-discover binary end to end: mock profiles must print
// exactly the golden discovery (inventory and published devices) of each built-in profile, NVML mode must work
// against the fake library and fail clearly without one.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "util/file_util.h"
#include "util/test_paths.h"
#include "util/test_temp_dir.h"

namespace {

struct RunResult {
  int exit_code;
  std::string out;
};

RunResult RunDiscover(const std::string& args) {
  std::string cmd = std::string(NVDRA_BIN_DIR) + "/nvdra-discover " + args + " 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  EXPECT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

class DiscoverProfileTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DiscoverProfileTest, PrintsTheGoldenDiscovery) {
  RunResult r = RunDiscover("--mock-hardware=" + GetParam());
  ASSERT_EQ(r.exit_code, 0);
  auto golden = nvdra::ReadFileToString(std::string(NVDRA_SOURCE_DIR) + "/src/cmd/nvdra-discover/testdata/profile-" +
                                        GetParam() + ".json");
  ASSERT_TRUE(golden.ok());
  EXPECT_EQ(r.out, *golden);
}

INSTANTIATE_TEST_SUITE_P(Builtins, DiscoverProfileTest, ::testing::Values("h100x8", "a100-mig", "gb200x4"));

TEST(DiscoverTest, CdiSpecForAllDevices) {
  RunResult r = RunDiscover("--mock-hardware=a100-mig --cdi-spec");
  ASSERT_EQ(r.exit_code, 0);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kind"], "k8s.gpu.nvidia.com/claim");
  EXPECT_EQ(j["cdiVersion"], "0.5.0");  // hostPath of the mock root
  EXPECT_EQ(j["devices"].size(), 7u);
}

TEST(DiscoverTest, CommonEditsShowTheDriverFilesAndHooks) {
  RunResult r = RunDiscover("--mock-hardware=h100x8 --common-edits --nvidia-cdi-hook-path=/opt/nvidia-cdi-hook");
  ASSERT_EQ(r.exit_code, 0);
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["env"][0], "NVIDIA_CTK_LIBCUDA_DIR=/usr/lib/x86_64-linux-gnu");
  bool libcuda = false;
  for (const auto& m : j["mounts"]) libcuda |= m["containerPath"] == "/usr/lib/x86_64-linux-gnu/libcuda.so.570.158.01";
  EXPECT_TRUE(libcuda);
  // The GBM link's hook first (the mock has libnvidia-allocator), then the
  // libraries' links, enable-cuda-compat, update-ldcache and
  // disable-device-node-modification.
  ASSERT_EQ(j["hooks"].size(), 5u);
  EXPECT_EQ(j["hooks"][0]["path"], "/opt/nvidia-cdi-hook");
  EXPECT_EQ(j["hooks"][0]["args"][3], "../libnvidia-allocator.so.1::/usr/lib/x86_64-linux-gnu/gbm/nvidia-drm_gbm.so");
  EXPECT_EQ(j["hooks"][2]["args"][2], "--host-driver-version=570.158.01");
}

TEST(DiscoverTest, NvmlAgainstFakeLibrary) {
  nvdra::testing::TempDir tmp("nvdra-discover");
  std::string cfg = tmp.path() + "/nvml.json";
  ASSERT_TRUE(nvdra::WriteFileAtomically(cfg, R"({"driverVersion":"570.158.01","cudaDriverVersion":12080,
    "devices":[{"minor":0,"uuid":"GPU-1","name":"NVIDIA H100 80GB HBM3","brand":14,"arch":9,"cc":[9,0],
    "busId":"00000000:3B:00.0","memoryTotal":1024}]})")
                  .ok());
  std::string env = "FAKE_NVML_CONFIG=" + cfg + " ";
  std::string cmd = env + std::string(NVDRA_BIN_DIR) +
                    "/nvdra-discover --container-driver-root=" + NVDRA_FAKE_NVML_ROOT + " --sysfs-root=" + tmp.path();
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = ::pclose(p);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["gpuDevices"][0]["name"], "gpu-0");
  EXPECT_EQ(j["gpuDevices"][0]["attributes"]["driverVersion"]["version"], "570.158.1");
  EXPECT_EQ(j["inventory"]["gpus"][0]["pciBusId"], "0000:3b:00.0");
}

TEST(DiscoverTest, MissingLibraryFailsClearly) {
  RunResult r = RunDiscover("--container-driver-root=/nonexistent-driver-root");
  EXPECT_EQ(r.exit_code, 75) << "the driver may still be installed: worth a retry";
  EXPECT_TRUE(r.out.empty()) << "nothing is printed as if it were the truth";
}

TEST(DiscoverTest, DriverNotLoadedIsTemporaryFailure) {
  // The fake library without $FAKE_NVML_CONFIG answers DRIVER_NOT_LOADED.
  RunResult r = RunDiscover("--container-driver-root=" + std::string(NVDRA_FAKE_NVML_ROOT));
  EXPECT_EQ(r.exit_code, 75);
  EXPECT_TRUE(r.out.empty());
}

}  // namespace
