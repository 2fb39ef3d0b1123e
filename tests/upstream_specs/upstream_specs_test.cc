// Every opaque config in the upstream user specs must decode as the Go driver
// decodes it, and resolve for the requests it names.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "cmd/config_kinds/config_kinds.h"
#include "computedomain/compute_domain_kind.h"
#include "config/config_decoder.h"
#include "config/config_resolver.h"
#include "config/yaml_to_json.h"
#include "devices/backends/open_device_lib.h"
#include "gpu/gpu_kind.h"
#include "gpu/mps_config.h"
#include "gpu/mps_daemon.h"
#include "gpu/time_slicing_config.h"
#include "gpu/vfio_config.h"
#include "util/test_paths.h"
#include "util/test_temp_dir.h"

namespace nvdra::config {
namespace {

namespace fs = std::filesystem;
using computedomain::ComputeDomainChannelConfig;
using gpu::GpuConfig;
using gpu::MpsConfig;
using gpu::TimeSliceInterval;
using gpu::VfioDeviceConfig;
using testing::ManifestConfig;
using testing::OpaqueConfigsInManifest;

// nvdra's config kinds, registered as the programs register them at start.
[[maybe_unused]] const bool kKindsRegistered = RegisterNvdraConfigKinds().ok();

const fs::path kSpecs = fs::path(NVDRA_SHARED_DIR) / "fixtures" / "upstream-user-specs";
const FeatureGates kSharingGates = FeatureGates().With(Gate::kTimeSlicingSettings, true).With(Gate::kMPSSupport, true);

constexpr std::string_view kGpuDriverName = gpu::kDriverName;
constexpr std::string_view kComputeDomainDriverName = computedomain::kDriverName;

// Resolves with the rules the named driver's device kind declares.
// An allocation result with its device's type, as the kind would say it.
struct TypedResult {
  std::string request, device, type, driver;
};

// Resolves with the rules the named driver's device kind declares.
Result<std::vector<ConfigGroup>> ResolveConfigs(std::string_view driver, const std::vector<ClaimConfig>& configs,
                                                const std::vector<TypedResult>& typed, const FeatureGates& gates) {
  DriverConfigRules rules = driver == kGpuDriverName ? gpu::GpuConfigRules(gates)
                                                     : computedomain::ComputeDomainConfigRules();
  std::vector<model::AllocationResult> results;
  std::map<std::string, std::string> types;
  for (const auto& t : typed) {
    results.push_back({t.request, t.driver, "node-1", t.device, false, ""});
    types[t.device] = t.type;
  }
  auto type_of = [&types](const model::AllocationResult& r) { return types[r.device]; };
  return config::ResolveConfigs(rules, configs, results, type_of, gates);
}

// The GPU kind's plan for resolved groups, on mock H100s: where a sharing
// strategy is accepted or refused.
// MPS daemons that are never started: Plan only records them.
class UnusedDaemonApi final : public gpu::MpsDaemonApi {
 public:
  Status Create(const nlohmann::json&) override { return Internal("unused"); }
  Status CheckReady(const std::string&, const std::string&, kube::Deadline) override { return Internal("unused"); }
  Status Delete(const std::string&, const std::string&) override { return Internal("unused"); }
  Result<std::vector<std::string>> ListForNode(const std::string&, const std::string&) override {
    return Internal("unused");
  }
};
class UnusedMounter final : public gpu::ShmMounter {
 public:
  Status MountTmpfs(const std::string&, const std::string&) override { return Internal("unused"); }
  Status Unmount(const std::string&) override { return Internal("unused"); }
};

// The kind's plan of `groups` on a mock H100 node with MPS set up; `undo`
// gets the plan's undo record.
Status PlanOnMockGpus(const std::vector<ConfigGroup>& groups, nlohmann::json* undo = nullptr) {
  nvdra::testing::TempDir dir;
  devices::DeviceLibOptions o;
  o.mock_hardware = "h100x8";
  o.mock_root = dir.path() + "/mock";
  NVDRA_ASSIGN_OR_RETURN(auto lib, devices::OpenDeviceLib(o));
  NVDRA_ASSIGN_OR_RETURN(auto inventory, lib->Discover());
  gpu::GpuKindOptions options;
  options.mps.settings.ns = "nvdra";
  options.mps.settings.plugin_dir = dir.path() + "/plugin";
  options.mps.api = std::make_shared<UnusedDaemonApi>();
  options.mps.mounter = std::make_shared<UnusedMounter>();
  gpu::GpuKind kind(inventory, gpu::GpuContainerEdits(devices::ContainerSources::ForLib(*lib)), lib->control(),
                    std::move(options));
  driver::ClaimWork work;
  work.uid = "6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b";
  work.groups = groups;
  for (const auto& g : groups) work.results.insert(work.results.end(), g.results.begin(), g.results.end());
  auto plan = kind.Plan(work);
  if (plan.ok() && undo != nullptr) *undo = plan->undo;
  return plan.status();
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Fills the bats templates' ${PLACEHOLDERS} the way the bats suite does for
// resource.k8s.io/v1.
std::string Instantiate(std::string text) {
  const std::pair<const char*, const char*> kValues[] = {
      {"${TEST_K8S_RESOURCE_API_VERSION}", "v1"},
      {"${TEST_DEVCLASSNAME_CD_CHANNEL}",
       "exactly:\n        deviceClassName: compute-domain-default-channel.nvidia.com"},
  };
  for (const auto& [key, value] : kValues) {
    for (size_t pos; (pos = text.find(key)) != std::string::npos;) text.replace(pos, std::strlen(key), value);
  }
  return text;
}

std::vector<ManifestConfig> Load(const std::string& name) {
  std::string text = ReadFile(kSpecs / name);
  EXPECT_FALSE(text.empty()) << "missing fixture " << name;
  text = Instantiate(std::move(text));
  EXPECT_EQ(text.find("${"), std::string::npos) << name << " has a placeholder this test does not know";
  return OpaqueConfigsInManifest(text);
}

Config DecodeOrDie(const ManifestConfig& mc) {
  auto c = DecodeStrict(mc.config.parameters_json);
  EXPECT_TRUE(c.ok()) << mc.object_name << ": " << c.status().ToString() << "\n" << mc.config.parameters_json;
  return c.ok() ? *c : Config{};
}

TEST(UpstreamSpecsTest, EveryOpaqueConfigIsAccountedFor) {
  std::map<std::string, size_t> counts;
  for (const auto& entry : fs::directory_iterator(kSpecs)) {
    size_t n = Load(entry.path().filename().string()).size();
    if (n > 0) counts[entry.path().filename().string()] = n;
  }
  const std::map<std::string, size_t> want = {
      {"gpu-test-mps.yaml", 1},
      {"gpu-test-vfio-config.yaml", 1},
      {"gpu-test5.yaml", 2},
      {"gpu-test6.yaml", 1},
      {"rc-opaque-cfg-unknown-field.yaml.tmpl", 1},
  };
  EXPECT_EQ(counts, want) << "a fixture gained or lost an opaque config: add its expectations below";
}

TEST(UpstreamSpecsTest, MpsSpec) {
  auto configs = Load("gpu-test-mps.yaml");
  ASSERT_EQ(configs.size(), 1u);
  EXPECT_EQ(configs[0].object_kind, "ResourceClaimTemplate");
  EXPECT_EQ(configs[0].config.driver, "gpu.nvidia.com");
  EXPECT_EQ(configs[0].config.requests, std::vector<std::string>{"mps-gpu"});
  Config c = DecodeOrDie(configs[0]);
  const auto& gpu = c.Get<GpuConfig>();
  ASSERT_TRUE(gpu.Uses("MPS"));
  const MpsConfig& mps = *gpu.sharing->Settings<MpsConfig>();
  EXPECT_EQ(mps.default_active_thread_percentage, 50);
  ASSERT_TRUE(mps.default_pinned_device_memory_limit.has_value());
  EXPECT_EQ(mps.default_pinned_device_memory_limit->value(), 10LL * 1024 * 1024 * 1024);
  EXPECT_EQ(mps.default_pinned_device_memory_limit->Megabytes(), "10240M");
  EXPECT_TRUE(mps.default_per_device_pinned_memory_limit.empty());
  Normalize(c, kSharingGates);
  EXPECT_TRUE(Validate(c, kSharingGates).ok());

  auto resolved = ResolveConfigs(kGpuDriverName, {configs[0].config}, {{"mps-gpu", "gpu-0", "gpu", ""}}, kSharingGates);
  ASSERT_TRUE(resolved.ok()) << resolved.status().ToString();
  nlohmann::json undo;
  ASSERT_TRUE(PlanOnMockGpus(*resolved, &undo).ok());
  // One daemon for the request's GPU, with the spec's settings.
  ASSERT_EQ(undo["mps"].size(), 1u) << undo.dump();
  EXPECT_EQ(undo["mps"][0]["activeThreadPercentage"], 50);
  EXPECT_EQ(undo["mps"][0]["pinnedLimits"].size(), 1u);
  EXPECT_EQ(undo["mps"][0]["pinnedLimits"].begin().value(), "10240M");
}

TEST(UpstreamSpecsTest, TimeSlicingAndMpsPerRequest) {
  auto configs = Load("gpu-test5.yaml");
  ASSERT_EQ(configs.size(), 2u);
  EXPECT_EQ(configs[0].config.requests, std::vector<std::string>{"ts-gpu"});
  EXPECT_EQ(configs[1].config.requests, std::vector<std::string>{"mps-gpu"});
  Config ts = DecodeOrDie(configs[0]);
  EXPECT_EQ(TimeSliceOf(ts.Get<GpuConfig>()), TimeSliceInterval::kLong);
  Config mps = DecodeOrDie(configs[1]);
  EXPECT_EQ(mps.Get<GpuConfig>().sharing->Settings<MpsConfig>()->default_active_thread_percentage, 50);

  std::vector<ClaimConfig> claim = {configs[0].config, configs[1].config};
  // Only the time-sliced request allocated: one group, interval Long.
  auto ts_only = ResolveConfigs(kGpuDriverName, claim, {{"ts-gpu", "gpu-0", "gpu", "gpu.nvidia.com"}}, kSharingGates);
  ASSERT_TRUE(ts_only.ok()) << ts_only.status().ToString();
  ASSERT_EQ(ts_only->size(), 1u);
  EXPECT_EQ(TimeSliceOf((*ts_only)[0].config.Get<GpuConfig>()), TimeSliceInterval::kLong);
  EXPECT_EQ((*ts_only)[0].origin, (ConfigOrigin{ConfigOrigin::Kind::kClaim, 0}));
  // Both: gpu-0 time-sliced, an MPS daemon for gpu-1 only.
  auto both = ResolveConfigs(kGpuDriverName, claim, {{"ts-gpu", "gpu-0", "gpu", ""}, {"mps-gpu", "gpu-1", "gpu", ""}},
                             kSharingGates);
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  nlohmann::json undo;
  ASSERT_TRUE(PlanOnMockGpus(*both, &undo).ok());
  ASSERT_EQ(undo["timeSlicing"].size(), 1u);
  EXPECT_EQ(undo["timeSlicing"][0]["device"], "gpu-0");
  ASSERT_EQ(undo["mps"].size(), 1u);
  EXPECT_EQ(undo["mps"][0]["uuids"].size(), 1u);
  EXPECT_NE(undo["mps"][0]["uuids"][0], undo["timeSlicing"][0]["uuid"]);
  EXPECT_TRUE(PlanOnMockGpus(*ts_only).ok());
  // Gates off: upstream's gate message for the first group (mps-gpu sorts first).
  auto gates_off = ResolveConfigs(kGpuDriverName, claim,
                                  {{"ts-gpu", "gpu-0", "gpu", ""}, {"mps-gpu", "gpu-1", "gpu", ""}}, FeatureGates());
  ASSERT_FALSE(gates_off.ok());
  EXPECT_EQ(gates_off.status().message(),
            "error validating GPU config: \"MPS\" is selected as the GPU sharing strategy, but the \"MPSSupport\" "
            "feature gate is not enabled");
}

TEST(UpstreamSpecsTest, TimeSlicingOnSelectedGpus) {
  auto configs = Load("gpu-test6.yaml");
  ASSERT_EQ(configs.size(), 1u);
  EXPECT_EQ(configs[0].object_name, "a100");
  Config c = DecodeOrDie(configs[0]);
  EXPECT_EQ(TimeSliceOf(c.Get<GpuConfig>()), TimeSliceInterval::kLong);
  auto resolved = ResolveConfigs(kGpuDriverName, {configs[0].config},
                                 {{"gpu", "gpu-2", "gpu", ""}, {"gpu", "gpu-0", "gpu", ""}}, kSharingGates);
  ASSERT_TRUE(resolved.ok()) << resolved.status().ToString();
  ASSERT_EQ(resolved->size(), 1u);
  EXPECT_EQ((*resolved)[0].results.front().device, "gpu-0");
  EXPECT_EQ(ToCanonicalJson((*resolved)[0].config),
            R"({"kind":"GpuConfig","apiVersion":"resource.nvidia.com/v1beta1","sharing":{"strategy":"TimeSlicing",)"
            R"("timeSlicingConfig":{"interval":"Long"}}})");
}

TEST(UpstreamSpecsTest, VfioConfig) {
  auto configs = Load("gpu-test-vfio-config.yaml");
  ASSERT_EQ(configs.size(), 1u);
  EXPECT_EQ(configs[0].config.requests, std::vector<std::string>{"gpu"});
  Config c = DecodeOrDie(configs[0]);
  const auto& vfio = c.Get<VfioDeviceConfig>();
  ASSERT_TRUE(vfio.iommu.has_value());
  EXPECT_EQ(vfio.iommu->backend_policy, "LegacyOnly");
  EXPECT_EQ(vfio.iommu->enable_api_device, true);
  Normalize(c, FeatureGates().With(Gate::kPassthroughSupport, true));
  EXPECT_TRUE(Validate(c, FeatureGates().With(Gate::kPassthroughSupport, true)).ok());
  // The GPU kind serves the vfio device type (gpu-vfio-<index>): the
  // upstream spec's config applies to its passthrough device.
  auto resolved = ResolveConfigs(kGpuDriverName, {configs[0].config}, {{"gpu", "gpu-vfio-0", "vfio", ""}},
                                 FeatureGates().With(Gate::kPassthroughSupport, true));
  ASSERT_TRUE(resolved.ok()) << resolved.status().ToString();
  ASSERT_EQ(resolved->size(), 1u);
  ASSERT_TRUE((*resolved)[0].config.Is<VfioDeviceConfig>());
  EXPECT_EQ((*resolved)[0].config.Get<VfioDeviceConfig>().iommu->backend_policy, "LegacyOnly");
}

TEST(UpstreamSpecsTest, UnknownFieldIsRejectedWithUpstreamWording) {
  auto configs = Load("rc-opaque-cfg-unknown-field.yaml.tmpl");
  ASSERT_EQ(configs.size(), 1u);
  EXPECT_EQ(configs[0].object_name, "batssuite-rc-bad-opaque-config");
  EXPECT_EQ(configs[0].config.driver, "compute-domain.nvidia.com");
  auto decoded = DecodeStrict(configs[0].config.parameters_json);
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().message(), "strict decoding error: unknown field \"unexpectedField\"");
  // What the bats suite greps for in the pod's events and the plugin log.
  auto resolved = ResolveConfigs(kComputeDomainDriverName, {configs[0].config}, {{"chan", "channel-0", "channel", ""}},
                                 FeatureGates());
  ASSERT_FALSE(resolved.ok());
  EXPECT_NE(resolved.status().message().find("strict decoding error: unknown field \"unexpectedField\""),
            std::string::npos);
  EXPECT_FALSE(resolved.status().retryable());
  // The same document without the stray field is a valid channel config.
  auto lenient = DecodeLenient(configs[0].config.parameters_json);
  ASSERT_TRUE(lenient.ok());
  EXPECT_EQ(lenient->Get<ComputeDomainChannelConfig>().domain_id, "not-needed-for-test");
}

TEST(UpstreamSpecsTest, YamlScalarsBecomeTheJsonTheApiServerStores) {
  auto node = YAML::Load("a: 50\nb: 10Gi\nc: \"50\"\nd: true\ne: ~\nf: 1.5\ng: [x, 2]\n");
  EXPECT_EQ(testing::YamlToJson(node), R"({"a":50,"b":"10Gi","c":"50","d":true,"e":null,"f":1.5,"g":["x",2]})");
}

TEST(UpstreamSpecsTest, DeepYamlIsRefusedNotAStackOverflow) {
  // The parser refuses deep text itself; a node built in code is bounded by
  // the converter.
  EXPECT_THROW(YAML::Load(std::string(70'000, '[') + std::string(70'000, ']')), YAML::Exception);
  YAML::Node root = YAML::Load("[]");
  YAML::Node cur = root;
  for (int i = 0; i < 20'000; ++i) {
    YAML::Node next = YAML::Load("[]");
    cur.push_back(next);
    cur.reset(next);
  }
  EXPECT_THROW(testing::YamlToJson(root), std::invalid_argument);
  EXPECT_EQ(testing::YamlToJson(YAML::Load("[[[1]]]")), "[[[1]]]");
}

}  // namespace
}  // namespace nvdra::config
