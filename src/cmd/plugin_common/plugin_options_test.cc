#include "cmd/plugin_common/plugin_options.h"

#include "cmd/plugin_common/plugin_runner.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "config/feature_gates.h"
#include "util/build_info.h"
#include "util/log.h"

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

// The plugins' start applies upstream's own gate rules; every upstream gate
// starts (none is left unimplemented).
TEST(PluginOptionsTest, GateRulesApplyAndEveryGateStarts) {
  std::vector<const char*> args = {"plugin", "--node-name", "n1", "--feature-gates",
                                   "DeviceMetadata=true,PassthroughSupport=true"};
  auto c = LoadPluginConfig("plugin", "gpu.nvidia.com", static_cast<int>(args.size()), const_cast<char**>(args.data()));
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  std::vector<const char*> alone = {"plugin", "--node-name", "n1", "--feature-gates", "DeviceMetadata=true"};
  auto needs = LoadPluginConfig("plugin", "gpu.nvidia.com", static_cast<int>(alone.size()),
                                const_cast<char**>(alone.data()));
  ASSERT_FALSE(needs.ok());
  EXPECT_NE(needs.status().message().find("feature gate DeviceMetadata requires PassthroughSupport to also be enabled"),
            std::string::npos)
      << needs.status().message();
  std::vector<const char*> both = {"plugin", "--node-name", "n1", "--feature-gates",
                                   "DynamicMIG=true,PassthroughSupport=true"};
  auto rules_first = LoadPluginConfig("plugin", "gpu.nvidia.com", static_cast<int>(both.size()),
                                      const_cast<char**>(both.data()));
  ASSERT_FALSE(rules_first.ok());
  EXPECT_NE(rules_first.status().message().find("mutually exclusive"), std::string::npos)
      << rules_first.status().message();
  std::vector<const char*> fine = {"plugin", "--node-name", "n1", "--feature-gates",
                                   "TimeSlicingSettings=true,FabricManagerPartitioning=true"};
  EXPECT_TRUE(LoadPluginConfig("plugin", "gpu.nvidia.com", static_cast<int>(fine.size()),
                               const_cast<char**>(fine.data()))
                  .ok());
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

namespace nvdra::plugin {
namespace {

Status Load(std::vector<const char*> args) {
  args.insert(args.begin(), "plugin");
  auto c = LoadPluginConfig("plugin", "gpu.nvidia.com", static_cast<int>(args.size()), const_cast<char**>(args.data()));
  InitLogging(0);
  SetVModule({});
  return c.status();
}

// component-base's logging flags, which upstream's manifests may pass, are
// taken with upstream's rules instead of failing the start.
TEST(PluginOptionsTest, UpstreamsLoggingFlagsAreTakenWithTheirRules) {
  EXPECT_TRUE(Load({"--node-name", "n1", "--vmodule", "engine=6,mps_*=4", "--log-flush-frequency", "10s"}).ok());
  EXPECT_TRUE(Load({"--node-name", "n1", "--log-flush-frequency", "1m30s"}).ok());
  EXPECT_EQ(Load({"--node-name", "n1", "--vmodule", "engine"}).message(),
            "--vmodule: \"engine\" does not have the pattern=N format");
  EXPECT_EQ(Load({"--node-name", "n1", "--vmodule", "engine=x"}).message(),
            "--vmodule: parsing verbosity in \"engine=x\": strconv.ParseUint: parsing \"x\": invalid syntax");
  EXPECT_EQ(Load({"--node-name", "n1", "--logging-format", "json", "--vmodule", "engine=4"}).message(),
            "vmodule: Forbidden: Only supported for text log format");
  EXPECT_EQ(Load({"--node-name", "n1", "--log-flush-frequency", "0s"}).message(),
            "--log-flush-frequency: Invalid value: \"0s\": Must be greater than zero");
  EXPECT_EQ(Load({"--node-name", "n1", "--log-text-split-stream"}).message(),
            "--log-text-split-stream: Forbidden: Feature LoggingAlphaOptions is disabled");
  EXPECT_TRUE(Load({"--node-name", "n1", "--log-text-split-stream=false"}).ok());
  EXPECT_EQ(Load({"--node-name", "n1", "--log-json-info-buffer-size", "4Ki"}).message(),
            "--log-json-info-buffer-size: Forbidden: Feature LoggingAlphaOptions is disabled");
  EXPECT_TRUE(Load({"--node-name", "n1", "--feature-gates", "LoggingAlphaOptions=true", "--log-text-split-stream",
                    "--log-text-info-buffer-size", "4Ki"})
                  .ok());
}

// Go's flag package, which upstream's binaries use, takes long flags after
// one dash, with the value attached or following; so do the plugins.
TEST(PluginOptionsTest, GoSpellingsOfTheFlagsAreTaken) {
  auto o = Parse({"-node-name", "n1", "-v=3", "-cdi-root=/var/run/cdi", "-feature-gates", "MPSSupport=true",
                  "-log-flush-frequency", "10s"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->node_name, "n1");
  EXPECT_EQ(o->verbosity, 3);
  EXPECT_EQ(o->cdi_root, "/var/run/cdi");
  EXPECT_EQ(o->feature_gates, "MPSSupport=true");
  EXPECT_EQ(o->log_flush_frequency, "10s");
  auto spaced = Parse({"--node-name=n1", "-v", "4", "-log-text-split-stream"});
  ASSERT_TRUE(spaced.ok()) << spaced.status().ToString();
  EXPECT_EQ(spaced->verbosity, 4);
  EXPECT_TRUE(spaced->log_text_split_stream);
  EXPECT_FALSE(Parse({"-node-name", "n1", "-no-such-flag"}).ok());
}

// Every level klog takes starts the plugin (a chart value of 11 or 20 must
// not stop it); what klog refuses, and a negative level, is a usage error.
TEST(PluginOptionsTest, AnyNonNegativeVerbosityIsTaken) {
  const std::pair<std::vector<const char*>, int> taken[] = {
      {{"--node-name", "n1", "-v=20"}, 20},
      {{"--node-name", "n1", "--v", "11"}, 11},
      {{"--node-name", "n1", "-v", "2147483647"}, 2147483647},
      {{"--node-name", "n1", "--v=0"}, 0},
  };
  for (const auto& [args, level] : taken) {
    auto o = Parse(args);
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    EXPECT_EQ(o->verbosity, level);
  }
  setenv("V", "15", 1);
  auto env = Parse({"--node-name", "n1"});
  unsetenv("V");
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->verbosity, 15);
  for (const char* bad : {"-1", "abc", "4.5", "2147483648"}) {
    std::string flag = std::string("-v=") + bad;
    auto o = Parse({"--node-name", "n1", flag.c_str()});
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_NE(o.status().message().find(std::string("\"") + bad + "\" is not a log verbosity"), std::string::npos)
        << o.status().message();
  }
}

// Every logging flag reads the variable upstream's binaries read it from:
// the flag's name in capitals with '-' as '_'.
TEST(PluginOptionsTest, LoggingFlagsReadUpstreamsVariables) {
  const std::pair<const char*, const char*> vars[] = {{"V", "5"},
                                                      {"VMODULE", "engine=6"},
                                                      {"LOG_FLUSH_FREQUENCY", "7s"},
                                                      {"LOGGING_FORMAT", "text"},
                                                      {"LOG_TEXT_SPLIT_STREAM", "true"},
                                                      {"LOG_JSON_SPLIT_STREAM", "true"},
                                                      {"LOG_TEXT_INFO_BUFFER_SIZE", "1Ki"},
                                                      {"LOG_JSON_INFO_BUFFER_SIZE", "2Ki"}};
  for (const auto& [name, value] : vars) setenv(name, value, 1);
  auto o = Parse({"--node-name", "n1"});
  for (const auto& [name, value] : vars) unsetenv(name);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->verbosity, 5);
  EXPECT_EQ(o->vmodule, "engine=6");
  EXPECT_EQ(o->log_flush_frequency, "7s");
  EXPECT_TRUE(o->log_text_split_stream);
  EXPECT_TRUE(o->log_json_split_stream);
  EXPECT_EQ(o->log_text_info_buffer_size, "1Ki");
  EXPECT_EQ(o->log_json_info_buffer_size, "2Ki");
}

// --help lists the gates as upstream's help does.
TEST(PluginOptionsTest, HelpListsTheFeatureGatesWithStageAndDefault) {
  ::testing::internal::CaptureStdout();
  auto o = Parse({"--help"});
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(o.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(out.find("A set of key=value pairs that describe feature gates for alpha/experimental features. "
                     "Options are:"),
            std::string::npos)
      << out;
  for (const std::string& line : config::FeatureGates::KnownFeatures()) {
    EXPECT_NE(out.find(line), std::string::npos) << line;
  }
}

TEST(PluginOptionsTest, VmoduleRaisesTheLevelOfMatchingFilesOnly) {
  InitLogging(1);
  SetVModule(*ParseVModule("eng*=6,claim_?edger=3"));
  EXPECT_TRUE(log_internal::VEnabled(6, "src/driver/engine.cc"));
  EXPECT_FALSE(log_internal::VEnabled(7, "src/driver/engine.cc"));
  EXPECT_TRUE(log_internal::VEnabled(3, "src/ledger/claim_ledger.cc"));
  EXPECT_FALSE(log_internal::VEnabled(2, "src/kube/watch_cache.cc"));
  EXPECT_TRUE(log_internal::VEnabled(1, "src/kube/watch_cache.cc")) << "-v still applies";
  SetVModule({});
  EXPECT_FALSE(log_internal::VEnabled(6, "src/driver/engine.cc"));
  InitLogging(0);
}

TEST(PluginOptionsTest, VersionSaysVersionCommitAndDate) {
  ::testing::internal::CaptureStdout();
  auto o = Parse({"--version"});
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(o.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(out,
            std::string("nvdra ") + BuildVersion() + "\ncommit: " + BuildCommit() + "\ndate: " + BuildDate() + "\n");
  EXPECT_EQ(std::string(BuildVersion()), "0.1.0");
}

TEST(PluginOptionsTest, HostDriverRootIsUpstreamsSecondVariableAndAlias) {
  setenv("HOST_DRIVER_ROOT", "/run/nvidia/driver", 1);
  auto o = Parse({"--node-name", "n1"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->nvidia_driver_root, "/run/nvidia/driver");
  setenv("NVIDIA_DRIVER_ROOT", "/", 1);
  o = Parse({"--node-name", "n1"});
  EXPECT_EQ(o->nvidia_driver_root, "/") << "NVIDIA_DRIVER_ROOT comes first";
  unsetenv("NVIDIA_DRIVER_ROOT");
  unsetenv("HOST_DRIVER_ROOT");
  o = Parse({"--node-name", "n1", "--host_driver-root", "/opt/driver"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->nvidia_driver_root, "/opt/driver");
}

TEST(PluginOptionsTest, MockLayoutFlagAndEnvironment) {
  auto o = Parse({"--node-name", "n1", "--mock-layout", "gpu-operator"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->mock_layout, "gpu-operator");
  setenv("NVDRA_MOCK_LAYOUT", "plain", 1);
  o = Parse({"--node-name", "n1"});
  unsetenv("NVDRA_MOCK_LAYOUT");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->mock_layout, "plain");
  auto bad = Parse({"--node-name", "n1", "--mock-layout", "operator"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--mock-layout"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace nvdra::plugin
