// The config resolver with nvdra's config kinds.
#include "config/config_resolver.h"

#include <gtest/gtest.h>
#include <map>

#include "cmd/config_kinds/config_kinds.h"
#include "computedomain/compute_domain_config_kinds.h"
#include "gpu/gpu_config_kinds.h"
#include "gpu/mig_config.h"
#include "gpu/mps_config.h"
#include "gpu/time_slicing_config.h"
#include "gpu/vfio_config.h"

namespace nvdra::config {
namespace {

using computedomain::ComputeDomainChannelConfig;
using computedomain::ComputeDomainDaemonConfig;
using gpu::GpuConfig;
using gpu::IommuConfig;
using gpu::MigDeviceConfig;
using gpu::MpsConfig;
using gpu::TimeSliceInterval;
using gpu::TimeSlicingConfig;
using gpu::VfioDeviceConfig;

[[maybe_unused]] const bool kResolverTestKinds = RegisterNvdraConfigKinds().ok();

// Two drivers shaped like the ones the device kinds declare: the resolver
// itself knows no driver, only the rules it is given.
constexpr char kGpu[] = "accel.example.com";
constexpr char kCd[] = "fabric.example.com";

DriverConfigRules GpuRules(const FeatureGates& gates) {
  DriverConfigRules r{kGpu,
                      {{"gpu", "GpuConfig"}, {"mig", "MigDeviceConfig"}, {"vfio", "VfioDeviceConfig"}},
                      {},
                      "is the PassthroughSupport feature gate enabled?"};
  if (gates.Enabled(Gate::kPassthroughSupport)) r.defaults.push_back(VfioDeviceConfig{});
  r.defaults.push_back(MigDeviceConfig{});
  r.defaults.push_back(GpuConfig{});
  return r;
}

DriverConfigRules CdRules() {
  return {kCd,
          {{"channel", "ComputeDomainChannelConfig"}, {"daemon", "ComputeDomainDaemonConfig"}},
          {ComputeDomainDaemonConfig{}, ComputeDomainChannelConfig{}},
          ""};
}

// The device type of each device name the tests use, as a kind would say.
std::map<std::string, std::string>& DeviceTypes() {
  static std::map<std::string, std::string> types;
  return types;
}

std::string TypeOf(const model::AllocationResult& r) {
  auto it = DeviceTypes().find(r.device);
  return it == DeviceTypes().end() ? "" : it->second;
}

Result<std::vector<ConfigGroup>> ResolveConfigs(std::string_view driver, const std::vector<ClaimConfig>& configs,
                                                const std::vector<model::AllocationResult>& results,
                                                const FeatureGates& gates) {
  if (driver == kGpu) return config::ResolveConfigs(GpuRules(gates), configs, results, TypeOf, gates);
  if (driver == kCd) return config::ResolveConfigs(CdRules(), configs, results, TypeOf, gates);
  return config::ResolveConfigs(DriverConfigRules{std::string(driver), {}, {}, ""}, configs, results, TypeOf, gates);
}
const FeatureGates kTs = FeatureGates().With(Gate::kTimeSlicingSettings, true);

std::string TsJson(std::string_view interval) {
  return R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":")" +
         std::string(interval) + "\"}}}";
}

ClaimConfig Cfg(ConfigSource source, std::vector<std::string> requests, std::string json, std::string driver = kGpu) {
  ClaimConfig c;
  c.source = source;
  c.requests = std::move(requests);
  c.driver = std::move(driver);
  c.parameters_json = std::move(json);
  return c;
}

// A result of this driver (the resolver skips other drivers' results).
model::AllocationResult Res(std::string request, std::string device, std::string type = "gpu") {
  DeviceTypes()[device] = std::move(type);
  return {std::move(request), "", "node-1", std::move(device), false, ""};
}

// The interval each result ends up with ("none" for the plain default).
std::map<std::string, std::string> Intervals(const std::vector<ConfigGroup>& groups) {
  std::map<std::string, std::string> out;
  for (const auto& g : groups) {
    std::string v = "none";
    if (const auto* gpu = g.config.As<GpuConfig>(); gpu && TimeSliceOf(*gpu)) {
      v = std::string(TimeSliceIntervalName(*TimeSliceOf(*gpu)));
    }
    for (const auto& r : g.results) out[r.request + "/" + r.device] = v;
  }
  return out;
}

TEST(ConfigResolverTest, PrecedenceTable) {
  using S = ConfigSource;
  struct Case {
    const char* name;
    std::vector<ClaimConfig> configs;
    std::map<std::string, std::string> want;
  };
  const std::vector<model::AllocationResult> results = {Res("a", "gpu-0"), Res("b", "gpu-1")};
  const std::vector<Case> cases = {
      {"defaults only", {}, {{"a/gpu-0", "none"}, {"b/gpu-1", "none"}}},
      {"class config applies to all",
       {Cfg(S::kFromClass, {}, TsJson("Short"))},
       {{"a/gpu-0", "Short"}, {"b/gpu-1", "Short"}}},
      {"claim beats class even when listed first",
       {Cfg(S::kFromClaim, {}, TsJson("Long")), Cfg(S::kFromClass, {}, TsJson("Short"))},
       {{"a/gpu-0", "Long"}, {"b/gpu-1", "Long"}}},
      {"later claim config beats earlier",
       {Cfg(S::kFromClaim, {}, TsJson("Long")), Cfg(S::kFromClaim, {}, TsJson("Medium"))},
       {{"a/gpu-0", "Medium"}, {"b/gpu-1", "Medium"}}},
      {"later class config beats earlier",
       {Cfg(S::kFromClass, {}, TsJson("Long")), Cfg(S::kFromClass, {}, TsJson("Medium"))},
       {{"a/gpu-0", "Medium"}, {"b/gpu-1", "Medium"}}},
      {"scoped config only for its request",
       {Cfg(S::kFromClaim, {"b"}, TsJson("Long"))},
       {{"a/gpu-0", "none"}, {"b/gpu-1", "Long"}}},
      {"scoped claim config beats later unscoped class config",
       {Cfg(S::kFromClaim, {"a"}, TsJson("Long")), Cfg(S::kFromClass, {}, TsJson("Short"))},
       {{"a/gpu-0", "Long"}, {"b/gpu-1", "Short"}}},
      {"later unscoped claim config beats earlier scoped one",
       {Cfg(S::kFromClaim, {"a"}, TsJson("Long")), Cfg(S::kFromClaim, {}, TsJson("Short"))},
       {{"a/gpu-0", "Short"}, {"b/gpu-1", "Short"}}},
      {"other drivers' configs are ignored, even unparseable ones",
       {Cfg(S::kFromClaim, {}, "not json at all", "other.example.com"), Cfg(S::kFromClass, {}, TsJson("Short"))},
       {{"a/gpu-0", "Short"}, {"b/gpu-1", "Short"}}},
      {"unscoped config of another type is skipped",
       {Cfg(S::kFromClaim, {}, R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":"MigDeviceConfig"})"),
        Cfg(S::kFromClass, {}, TsJson("Medium"))},
       {{"a/gpu-0", "Medium"}, {"b/gpu-1", "Medium"}}},
  };
  for (const Case& c : cases) {
    auto groups = ResolveConfigs(kGpu, c.configs, results, kTs);
    ASSERT_TRUE(groups.ok()) << c.name << ": " << groups.status().ToString();
    EXPECT_EQ(Intervals(*groups), c.want) << c.name;
  }
}

TEST(ConfigResolverTest, GroupsAreDeterministicAndCarryTheirOrigin) {
  std::vector<ClaimConfig> configs = {Cfg(ConfigSource::kFromClass, {}, TsJson("Short")),
                                      Cfg(ConfigSource::kFromClaim, {"z"}, TsJson("Long"))};
  std::vector<model::AllocationResult> results = {Res("z", "gpu-3"), Res("b", "gpu-2"), Res("a", "mig-1", "mig"),
                                                  Res("a", "gpu-0"), Res("z", "gpu-1")};
  auto groups = ResolveConfigs(kGpu, configs, results, kTs);
  ASSERT_TRUE(groups.ok()) << groups.status().ToString();
  ASSERT_EQ(groups->size(), 3u);
  // Sorted by first (request, device): a/gpu-0 (class), a/mig-1 (default MIG), z/gpu-1 (claim).
  EXPECT_EQ((*groups)[0].origin, (ConfigOrigin{ConfigOrigin::Kind::kClass, 0}));
  EXPECT_EQ((*groups)[0].results, (std::vector<model::AllocationResult>{Res("a", "gpu-0"), Res("b", "gpu-2")}));
  EXPECT_EQ((*groups)[1].origin.kind, ConfigOrigin::Kind::kDefault);
  EXPECT_TRUE((*groups)[1].config.Is<MigDeviceConfig>());
  EXPECT_EQ((*groups)[2].origin.ToString(), "claim config #1");
  EXPECT_EQ((*groups)[2].results, (std::vector<model::AllocationResult>{Res("z", "gpu-1"), Res("z", "gpu-3")}));

  std::reverse(results.begin(), results.end());
  auto again = ResolveConfigs(kGpu, configs, results, kTs);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), groups->size());
  for (size_t i = 0; i < groups->size(); ++i) {
    EXPECT_EQ((*again)[i].results, (*groups)[i].results);
    EXPECT_EQ(ToCanonicalJson((*again)[i].config), ToCanonicalJson((*groups)[i].config));
  }
}

TEST(ConfigResolverTest, ScopedConfigOfTheWrongTypeIsAnError) {
  auto r = ResolveConfigs(kGpu, {Cfg(ConfigSource::kFromClaim, {"m"}, TsJson("Long"))},
                          {Res("m", "gpu-0-mig-1g", "mig")}, kTs);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "cannot apply GpuConfig to device \"gpu-0-mig-1g\" of type \"mig\" (request: m)");

  auto cd = ResolveConfigs(
      kCd,
      {Cfg(ConfigSource::kFromClaim, {"d"},
           R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":"ComputeDomainChannelConfig","domainID":"u"})", kCd)},
      {Res("d", "daemon-0", "daemon")}, FeatureGates());
  ASSERT_FALSE(cd.ok());
  EXPECT_EQ(cd.status().message(), "cannot apply ComputeDomainChannelConfig to request: d");
}

TEST(ConfigResolverTest, DecodeErrorsUseUpstreamWrapping) {
  auto r = ResolveConfigs(kGpu,
                          {Cfg(ConfigSource::kFromClaim, {"unused-request"},
                               R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","bogus":1})")},
                          {Res("a", "gpu-0")}, kTs);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(r.status().retryable());
  EXPECT_EQ(r.status().message(),
            "error getting opaque device configs: error decoding config parameters: strict decoding error: unknown "
            "field \"bogus\"");
}

// A source other than FromClass/FromClaim is refused as upstream refuses it,
// even on another driver's config, and before anything is decoded.
TEST(ConfigResolverTest, UnknownConfigSourceIsRefused) {
  EXPECT_EQ(ParseConfigSource("FromClass"), ConfigSource::kFromClass);
  EXPECT_EQ(ParseConfigSource("FromClaim"), ConfigSource::kFromClaim);
  EXPECT_EQ(ParseConfigSource("fromclaim"), ConfigSource::kOther);
  ClaimConfig other = Cfg(ConfigSource::kOther, {}, "not even json", "other.example.com");
  other.source_name = "FromElsewhere";
  auto r = ResolveConfigs(kGpu, {Cfg(ConfigSource::kFromClaim, {}, TsJson("Long")), other}, {Res("a", "gpu-0")}, kTs);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "error getting opaque device configs: invalid config source: FromElsewhere");
}

TEST(ConfigResolverTest, NonOpaqueConfigsAreRejected) {
  ClaimConfig c;
  c.opaque = false;
  auto r = ResolveConfigs(kGpu, {c}, {Res("a", "gpu-0")}, kTs);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "only opaque parameters are supported by this driver");
}

TEST(ConfigResolverTest, ValidationErrorsAreWrapped) {
  auto gate_off = ResolveConfigs(kGpu, {Cfg(ConfigSource::kFromClaim, {}, TsJson("Long"))}, {Res("a", "gpu-0")},
                                 FeatureGates());
  ASSERT_FALSE(gate_off.ok());
  EXPECT_EQ(gate_off.status().message(),
            "error validating GPU config: \"TimeSlicing\" is selected as the GPU sharing strategy, but the "
            "\"TimeSlicingSettings\" feature gate is not enabled");
  // A config that applies to nothing is decoded but not validated (upstream).
  auto unused = ResolveConfigs(kGpu, {Cfg(ConfigSource::kFromClaim, {"nobody"}, TsJson("Whenever"))},
                               {Res("a", "gpu-0")}, kTs);
  EXPECT_TRUE(unused.ok()) << unused.status().ToString();
}

TEST(ConfigResolverTest, MpsIsGatedAndThenResolvedForTheKindToDecide) {
  const std::string mps =
      R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS"}})";
  auto off = ResolveConfigs(kGpu, {Cfg(ConfigSource::kFromClaim, {}, mps)}, {Res("a", "gpu-0")}, kTs);
  ASSERT_FALSE(off.ok());
  EXPECT_EQ(off.status().message(),
            "error validating GPU config: \"MPS\" is selected as the GPU sharing strategy, but the \"MPSSupport\" "
            "feature gate is not enabled");
  auto on = ResolveConfigs(kGpu, {Cfg(ConfigSource::kFromClaim, {}, mps)}, {Res("a", "gpu-0"), Res("a", "gpu-1")},
                           kTs.With(Gate::kMPSSupport, true));
  // Whether MPS is served is the device kind's decision (gpu/mps_strategy.h).
  ASSERT_TRUE(on.ok()) << on.status().ToString();
  ASSERT_EQ(on->size(), 1u);
  EXPECT_TRUE((*on)[0].config.Get<GpuConfig>().Uses(gpu::kMpsStrategy));
  EXPECT_EQ((*on)[0].results.size(), 2u);
}

TEST(ConfigResolverTest, ComputeDomainClaimsNeedADomainId) {
  auto none = ResolveConfigs(kCd, {}, {Res("chan", "channel-0", "channel")}, FeatureGates());
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(), "error validating config: domainID cannot be empty");

  auto ok = ResolveConfigs(
      kCd,
      {Cfg(ConfigSource::kFromClaim, {"chan"},
           R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":"ComputeDomainChannelConfig","domainID":"cd-1"})",
           kCd),
       Cfg(ConfigSource::kFromClaim, {}, TsJson("Long"), kGpu)},
      {Res("chan", "channel-0", "channel"), {"x", "gpu-0", "gpu", kGpu}}, FeatureGates());
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->size(), 1u);
  const auto& chan = (*ok)[0].config.Get<ComputeDomainChannelConfig>();
  EXPECT_EQ(chan.domain_id, "cd-1");
  EXPECT_EQ(chan.allocation_mode, "Single");  // normalized
}

TEST(ConfigResolverTest, VfioNeedsPassthroughSupport) {
  auto off = ResolveConfigs(kGpu, {}, {Res("v", "gpu-0-vfio", "vfio")}, FeatureGates());
  ASSERT_FALSE(off.ok());
  EXPECT_NE(off.status().message().find("PassthroughSupport"), std::string::npos);
  auto on = ResolveConfigs(kGpu, {}, {Res("v", "gpu-0-vfio", "vfio")},
                           FeatureGates().With(Gate::kPassthroughSupport, true));
  ASSERT_TRUE(on.ok()) << on.status().ToString();
  ASSERT_EQ(on->size(), 1u);
  const auto& vfio = (*on)[0].config.Get<VfioDeviceConfig>();
  EXPECT_EQ(vfio.iommu->backend_policy, "LegacyOnly");
}

TEST(ConfigResolverTest, RejectsUnknownDriversAndDeviceTypes) {
  EXPECT_FALSE(ResolveConfigs("example.com", {}, {}, FeatureGates()).ok());
  auto r = ResolveConfigs(kGpu, {}, {Res("a", "channel-0", "channel")}, FeatureGates());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("does not serve"), std::string::npos);
  auto empty = ResolveConfigs(kGpu, {}, {}, FeatureGates());
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(ConfigResolverTest, MainRequestNamesCoverTheirSubrequests) {
  std::vector<ClaimConfig> configs = {Cfg(ConfigSource::kFromClaim, {"gpu"}, TsJson("Long")),
                                      Cfg(ConfigSource::kFromClaim, {"gpu/small"}, TsJson("Short"))};
  auto groups = ResolveConfigs(kGpu, configs,
                               {Res("gpu/large", "gpu-0"), Res("gpu/small", "gpu-1"), Res("gpus", "gpu-2"),
                                Res("gpu", "gpu-3")},
                               kTs);
  ASSERT_TRUE(groups.ok()) << groups.status().ToString();
  EXPECT_EQ(Intervals(*groups), (std::map<std::string, std::string>{{"gpu/large/gpu-0", "Long"},
                                                                    {"gpu/small/gpu-1", "Short"},
                                                                    {"gpus/gpu-2", "none"},
                                                                    {"gpu/gpu-3", "Long"}}));
}

}  // namespace
}  // namespace nvdra::config
