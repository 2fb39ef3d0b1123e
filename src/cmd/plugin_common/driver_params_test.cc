// maskNvidiaDriverParams: the rewrite, and the mount in a mount namespace of
// the test's own (a stand-in params file, as /proc/driver/nvidia/params
// exists only where a driver is loaded).
#include "cmd/plugin_common/driver_params.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "cmd/plugin_common/plugin_options.h"
#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::plugin {
namespace {

const char* kParams = "ResmanDebugLevel: 4294967295\nModifyDeviceFiles: 1\nDeviceFileUID: 0\n";

TEST(DriverParamsTest, OnlyModifyDeviceFilesOneIsTurnedOff) {
  EXPECT_EQ(ParamsWithDeviceFilesUnmodified(kParams),
            "ResmanDebugLevel: 4294967295\nModifyDeviceFiles: 0\nDeviceFileUID: 0\n");
  EXPECT_EQ(ParamsWithDeviceFilesUnmodified("ModifyDeviceFiles: 0\n"), std::nullopt);
  EXPECT_EQ(ParamsWithDeviceFilesUnmodified("DeviceFileMode: 438\n"), std::nullopt);
}

TEST(DriverParamsTest, NoDriverIsNoError) {
  nvdra::testing::TempDir tmp;
  auto r = MaskDriverParams(JoinPath(tmp.path(), "missing"), JoinPath(tmp.path(), "copy"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, MaskResult::kNoDriver);
  EXPECT_FALSE(PathExists(JoinPath(tmp.path(), "copy")));
}

// The child's view after masking: 0 all went well; else which check failed.
int MaskInOwnNamespace(const std::string& params, const std::string& copy) {
  if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_PRIVATE | MS_REC, nullptr) != 0) return 90;
  auto r = MaskDriverParams(params, copy);
  if (!r.ok() || *r != MaskResult::kMasked) return 1;
  auto seen = ReadFileToString(params);
  if (!seen.ok() || seen->find("ModifyDeviceFiles: 0\n") == std::string::npos) return 2;
  if (seen->find("ResmanDebugLevel: 4294967295\n") == std::string::npos) return 3;
  // A second start in the same namespace finds it masked and mounts nothing.
  auto again = MaskDriverParams(params, copy);
  if (!again.ok() || *again != MaskResult::kAlreadyMasked) return 4;
  return 0;
}

TEST(DriverParamsTest, TheContainerSeesModifyDeviceFilesZeroAndTheHostKeepsOne) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounts need root";
  nvdra::testing::TempDir tmp;
  const std::string params = JoinPath(tmp.path(), "params");
  ASSERT_TRUE(WriteFileAtomically(params, kParams).ok());
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(MaskInOwnNamespace(params, JoinPath(tmp.path(), "driver-params")));
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // Outside the plugin's mount namespace the driver's file is untouched.
  auto host = ReadFileToString(params);
  ASSERT_TRUE(host.ok());
  EXPECT_EQ(*host, kParams);
}

TEST(DriverParamsTest, UpstreamsVariableTurnsItOnWithTrueAlone) {
  auto parse = [](std::vector<const char*> args) {
    args.insert(args.begin(), "plugin");
    return ParsePluginOptions("plugin", "gpu.nvidia.com", static_cast<int>(args.size()), args.data());
  };
  auto none = parse({"--node-name", "n"});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->MaskDriverParams());
  for (const auto& [value, on] : {std::pair{"true", true}, {"false", false}, {"", false}}) {
    setenv("MASK_NVIDIA_DRIVER_PARAMS", value, 1);
    auto env = parse({"--node-name", "n"});
    unsetenv("MASK_NVIDIA_DRIVER_PARAMS");
    ASSERT_TRUE(env.ok()) << value << ": " << env.status().ToString();
    EXPECT_EQ(env->MaskDriverParams(), on) << value;
  }
  auto flag = parse({"--node-name", "n", "--mask-nvidia-driver-params", "true"});
  ASSERT_TRUE(flag.ok());
  EXPECT_TRUE(flag->MaskDriverParams());
}

}  // namespace
}  // namespace nvdra::plugin
