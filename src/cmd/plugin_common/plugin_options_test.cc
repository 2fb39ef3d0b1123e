#include "cmd/plugin_common/plugin_options.h"

#include "cmd/plugin_common/plugin_runner.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace nvdra::plugin {
namespace {

Result<PluginOptions> Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "plugin");
  return ParsePluginOptions("plugin", "gpu.nvidia.com", static_cast<int>(args.size()), args.data());
}

TEST(PluginOptionsTest, UpstreamFlagNamesAndDefaults) {
  auto o = Parse({"--node-name", "n1", "--cdi-root", "/var/run/cdi", "--kubelet-plugins-directory-path", "/p/",
                  "--healthcheck-port", "51516", "--kube-api-qps", "20", "--kube-api-burst", "30"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->node_name, "n1");
  EXPECT_EQ(o->cdi_root, "/var/run/cdi");
  EXPECT_EQ(o->PluginDataDir("gpu.nvidia.com"), "/p/gpu.nvidia.com");
  EXPECT_EQ(o->kubelet.healthcheck_port, 51516);
  EXPECT_EQ(o->kube.qps, 20);
  EXPECT_EQ(o->kube.burst, 30);
  EXPECT_EQ(o->kubelet.plugin.registrar_dir, "/var/lib/kubelet/plugins_registry");
  EXPECT_EQ(o->metrics_path, "/metrics");
  EXPECT_EQ(o->reconcile_period, std::chrono::seconds(60));
}

// The plugins' start refuses a gate nvdra does not implement, naming it,
// after upstream's own gate rules.
TEST(PluginOptionsTest, UnimplementedFeatureGateRefusesToStart) {
  std::vector<const char*> args = {"plugin", "--node-name", "n1", "--feature-gates", "DRAListTypeAttributes=true"};
  auto c = LoadPluginConfig("plugin", "gpu.nvidia.com", static_cast<int>(args.size()), const_cast<char**>(args.data()));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(c.status().message().find("--feature-gates: feature gate DRAListTypeAttributes is not implemented by nvdra yet"),
            std::string::npos)
      << c.status().message();
  std::vector<const char*> both = {"plugin", "--node-name", "n1", "--feature-gates",
                                   "DynamicMIG=true,PassthroughSupport=true"};
  auto rules_first =
      LoadPluginConfig("plugin", "gpu.nvidia.com", static_cast<int>(both.size()), const_cast<char**>(both.data()));
  ASSERT_FALSE(rules_first.ok());
  EXPECT_NE(rules_first.status().message().find("mutually exclusive"), std::string::npos)
      << rules_first.status().message();
  std::vector<const char*> fine = {"plugin", "--node-name", "n1", "--feature-gates", "TimeSlicingSettings=true"};
  EXPECT_TRUE(
      LoadPluginConfig("plugin", "gpu.nvidia.com", static_cast<int>(fine.size()), const_cast<char**>(fine.data())).ok());
}

TEST(PluginOptionsTest, NodeNameFromEnvironment) {
  setenv("NODE_NAME", "from-env", 1);
  auto o = Parse({});
  unsetenv("NODE_NAME");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->node_name, "from-env");
}

TEST(PluginOptionsTest, CdiHookPathFlagAndEnvironment) {
  auto none = Parse({"--node-name", "n"});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->nvidia_cdi_hook_path, "") << "empty: copy the image's hook";
  auto flag = Parse({"--node-name", "n", "--nvidia-cdi-hook-path", "/usr/local/bin/nvidia-cdi-hook"});
  ASSERT_TRUE(flag.ok());
  EXPECT_EQ(flag->nvidia_cdi_hook_path, "/usr/local/bin/nvidia-cdi-hook");
  setenv("NVIDIA_CDI_HOOK_PATH", "/opt/hook", 1);
  auto env = Parse({"--node-name", "n"});
  unsetenv("NVIDIA_CDI_HOOK_PATH");
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->nvidia_cdi_hook_path, "/opt/hook");
}

TEST(PluginOptionsTest, BadInputIsAOneLineError) {
  auto missing = Parse({});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("--node-name"), std::string::npos);
  auto bad = Parse({"--node-name", "n", "--kube-api-qps", "fast"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().find('\n'), std::string::npos);
  EXPECT_FALSE(Parse({"--node-name", "n", "--no-such-flag"}).ok());
  EXPECT_FALSE(Parse({"--node-name", "n", "--claim-timeout", "60"}).ok());
  EXPECT_FALSE(Parse({"--node-name", "n", "--rolling-update-id", "../x"}).ok());
  EXPECT_FALSE(Parse({"--node-name", "n", "positional"}).ok());
}

}  // namespace
}  // namespace nvdra::plugin
