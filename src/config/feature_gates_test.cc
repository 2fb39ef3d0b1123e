#include "config/feature_gates.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace nvdra::config {
namespace {

TEST(FeatureGatesTest, UpstreamDefaultsAndStages) {
  FeatureGates g;
  struct Want {
    Gate gate;
    const char* name;
    bool enabled;
    Stage stage;
  };
  const Want want[] = {
      {Gate::kTimeSlicingSettings, "TimeSlicingSettings", false, Stage::kAlpha},
      {Gate::kMPSSupport, "MPSSupport", false, Stage::kAlpha},
      {Gate::kIMEXDaemonsWithDNSNames, "IMEXDaemonsWithDNSNames", true, Stage::kBeta},
      {Gate::kPassthroughSupport, "PassthroughSupport", false, Stage::kAlpha},
      {Gate::kDynamicMIG, "DynamicMIG", false, Stage::kAlpha},
      {Gate::kNVMLDeviceHealthCheck, "NVMLDeviceHealthCheck", false, Stage::kAlpha},
      {Gate::kComputeDomainCliques, "ComputeDomainCliques", true, Stage::kBeta},
      {Gate::kCrashOnNVLinkFabricErrors, "CrashOnNVLinkFabricErrors", true, Stage::kBeta},
      {Gate::kDeviceMetadata, "DeviceMetadata", false, Stage::kAlpha},
      {Gate::kContextualLogging, "ContextualLogging", true, Stage::kBeta},
  };
  for (const Want& w : want) {
    EXPECT_EQ(g.Enabled(w.gate), w.enabled) << w.name;
    EXPECT_EQ(FeatureGates::Name(w.gate), w.name);
    EXPECT_EQ(FeatureGates::FromName(w.name), w.gate);
    const GateSpec& spec = FeatureGates::Known()[static_cast<size_t>(w.gate)];
    EXPECT_EQ(spec.gate, w.gate);
    EXPECT_EQ(spec.stage, w.stage) << w.name;
  }
  for (size_t i = 0; i < FeatureGates::Known().size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(FeatureGates::Known()[i].gate), i) << "table order must follow the enum";
  }
  EXPECT_TRUE(g.Validate().ok());
}

TEST(FeatureGatesTest, ParsesUpstreamSyntax) {
  auto g = FeatureGates::Parse("TimeSlicingSettings=true,MPSSupport=True,,IMEXDaemonsWithDNSNames = 1,");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(g->Enabled(Gate::kTimeSlicingSettings));
  EXPECT_TRUE(g->Enabled(Gate::kMPSSupport));
  EXPECT_TRUE(g->Enabled(Gate::kIMEXDaemonsWithDNSNames));
  EXPECT_FALSE(g->Enabled(Gate::kDynamicMIG));

  auto later_wins = FeatureGates::Parse("DynamicMIG=true,DynamicMIG=f");
  ASSERT_TRUE(later_wins.ok());
  EXPECT_FALSE(later_wins->Enabled(Gate::kDynamicMIG));

  auto empty = FeatureGates::Parse("");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->ToString(), FeatureGates().ToString());
}

TEST(FeatureGatesTest, ParseErrorsUseComponentBaseWording) {
  auto missing = FeatureGates::Parse("MPSSupport");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "missing bool value for MPSSupport");

  auto bad = FeatureGates::Parse("MPSSupport=yes");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "invalid value of MPSSupport=yes, err: strconv.ParseBool: parsing \"yes\": invalid syntax");

  auto unknown = FeatureGates::Parse("TimeSlicingSettings=true,NoSuchGate=true");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(), "unrecognized feature gate: NoSuchGate");

  auto wrong_case = FeatureGates::Parse("mpssupport=true");
  EXPECT_FALSE(wrong_case.ok());
}

TEST(FeatureGatesTest, AllAlphaAndAllBetaYieldToExplicitSettings) {
  auto g = FeatureGates::Parse("AllAlpha=true,DynamicMIG=false,AllBeta=false,ComputeDomainCliques=true");
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(g->Enabled(Gate::kTimeSlicingSettings));
  EXPECT_TRUE(g->Enabled(Gate::kPassthroughSupport));
  EXPECT_FALSE(g->Enabled(Gate::kDynamicMIG));
  EXPECT_FALSE(g->Enabled(Gate::kIMEXDaemonsWithDNSNames));
  EXPECT_TRUE(g->Enabled(Gate::kComputeDomainCliques));
}

// Upstream has no rule for FabricManagerPartitioning: it goes with
// PassthroughSupport (full and passthrough GPUs are partitioned) or alone
// (full GPUs only), and with DynamicMIG.
TEST(FeatureGatesTest, FabricManagerPartitioningHasNoCrossGateRule) {
  for (const char* spec : {"FabricManagerPartitioning=true", "FabricManagerPartitioning=true,PassthroughSupport=true",
                           "FabricManagerPartitioning=true,DynamicMIG=true",
                           "FabricManagerPartitioning=true,ConsumableShares=true,MPSSupport=true"}) {
    auto g = FeatureGates::Parse(spec);
    ASSERT_TRUE(g.ok()) << spec;
    EXPECT_TRUE(g->Enabled(Gate::kFabricManagerPartitioning)) << spec;
    EXPECT_TRUE(g->Validate().ok()) << spec << ": " << g->Validate().message();
  }
}

// Every gate either works or refuses to start, naming itself; today every
// upstream gate works.
TEST(FeatureGatesTest, EveryUpstreamGateStarts) {
  EXPECT_TRUE(FeatureGates().RefuseUnimplemented().ok());
  for (const char* gates :
       {"TimeSlicingSettings=true,MPSSupport=true,NVMLDeviceHealthCheck=true,ConsumableShares=true",
        "DynamicMIG=true,DRAListTypeAttributes=true,HostManagedIMEXDaemon=true",
        "PassthroughSupport=true,DeviceMetadata=true,FabricManagerPartitioning=true", "AllAlpha=true"}) {
    auto g = FeatureGates::Parse(gates);
    ASSERT_TRUE(g.ok()) << gates;
    EXPECT_TRUE(g->RefuseUnimplemented().ok()) << gates;
  }
}

TEST(FeatureGatesTest, ValidateAppliesUpstreamRulesInOrder) {
  struct Case {
    const char* spec;
    const char* error;
  };
  const Case cases[] = {
      {"IMEXDaemonsWithDNSNames=false",
       "feature gate ComputeDomainCliques requires IMEXDaemonsWithDNSNames to also be enabled"},
      {"DynamicMIG=true,PassthroughSupport=true",
       "feature gate DynamicMIG is currently mutually exclusive with PassthroughSupport"},
      {"DynamicMIG=true,NVMLDeviceHealthCheck=true",
       "feature gate DynamicMIG is currently mutually exclusive with NVMLDeviceHealthCheck"},
      {"DynamicMIG=true,MPSSupport=true", "feature gate DynamicMIG is currently mutually exclusive with MPSSupport"},
      {"PassthroughSupport=true,NVMLDeviceHealthCheck=true",
       "feature gate PassthroughSupport is currently mutually exclusive with NVMLDeviceHealthCheck"},
      {"DeviceMetadata=true", "feature gate DeviceMetadata requires PassthroughSupport to also be enabled"},
      {"DynamicMIG=true,PassthroughSupport=true,IMEXDaemonsWithDNSNames=false",
       "feature gate ComputeDomainCliques requires IMEXDaemonsWithDNSNames to also be enabled"},
  };
  for (const Case& c : cases) {
    auto g = FeatureGates::Parse(c.spec);
    ASSERT_TRUE(g.ok()) << c.spec;
    Status st = g->Validate();
    EXPECT_FALSE(st.ok()) << c.spec;
    EXPECT_EQ(st.message(), c.error) << c.spec;
  }
  for (const char* ok :
       {"IMEXDaemonsWithDNSNames=false,ComputeDomainCliques=false", "DeviceMetadata=true,PassthroughSupport=true",
        "DynamicMIG=true", "TimeSlicingSettings=true,MPSSupport=true"}) {
    auto g = FeatureGates::Parse(ok);
    ASSERT_TRUE(g.ok());
    EXPECT_TRUE(g->Validate().ok()) << ok << ": " << g->Validate().message();
  }
}

// The help lists the gates as component-base's KnownFeatures does for
// upstream's --feature-gates: key=value pairs with stage and default, sorted.
TEST(FeatureGatesTest, HelpListsEveryGateWithItsStageAndDefault) {
  const std::vector<std::string> known = FeatureGates::KnownFeatures();
  ASSERT_EQ(known.size(), FeatureGates::Known().size() + 2);
  EXPECT_EQ(known.front(), "AllAlpha=true|false (ALPHA - default=false)");
  EXPECT_EQ(known[1], "AllBeta=true|false (BETA - default=false)");
  EXPECT_TRUE(std::is_sorted(known.begin(), known.end()));
  for (const char* want :
       {"ComputeDomainCliques=true|false (BETA - default=true)", "ContextualLogging=true|false (BETA - default=true)",
        "DynamicMIG=true|false (ALPHA - default=false)", "TimeSlicingSettings=true|false (ALPHA - default=false)"}) {
    EXPECT_NE(std::find(known.begin(), known.end(), want), known.end()) << want;
  }
  const std::string help = FeatureGates::FlagHelp();
  EXPECT_EQ(help.rfind("A set of key=value pairs that describe feature gates for alpha/experimental features. "
                       "Options are:\n     AllAlpha=true|false (ALPHA - default=false)\n     AllBeta=",
                       0),
            0u)
      << help;
  EXPECT_NE(help.find("\n     MPSSupport=true|false (ALPHA - default=false)"), std::string::npos) << help;
}

TEST(FeatureGatesTest, ToStringListsEveryGateSorted) {
  FeatureGates g = FeatureGates().With(Gate::kMPSSupport, true);
  std::string s = g.ToString();
  EXPECT_NE(s.find("MPSSupport=true"), std::string::npos);
  EXPECT_NE(s.find("TimeSlicingSettings=false"), std::string::npos);
  EXPECT_EQ(s.rfind("ComputeDomainCliques=true,", 0), 0u) << s;
  size_t commas = std::count(s.begin(), s.end(), ',');
  EXPECT_EQ(commas + 1, FeatureGates::Known().size());
  auto round_trip = FeatureGates::Parse(s);
  ASSERT_TRUE(round_trip.ok());
  EXPECT_EQ(round_trip->ToString(), s);
}

}  // namespace
}  // namespace nvdra::config
