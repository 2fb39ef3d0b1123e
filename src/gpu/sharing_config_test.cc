// The registry of sharing settings blocks: a block registered only here is
// decoded, defaulted, validated, written and trimmed inside a GpuConfig's
// `sharing` without any change to the config kinds, and refused where no
// config kind carries it.
#include "gpu/sharing_config.h"

#include <gtest/gtest.h>

#include "config/config_decoder.h"
#include "gpu/gpu_config_kinds.h"
#include "gpu/mps_config.h"
#include "gpu/time_slicing_config.h"

namespace nvdra::gpu {
namespace {

using config::FeatureGates;
using config::Gate;

// A strategy of this test alone, carried by GpuConfig only.
struct LullabyConfig {
  std::optional<int64_t> verses;
  std::optional<std::string> tune;
  static const SharingBlockKind& BlockKind();
  friend bool operator==(const LullabyConfig&, const LullabyConfig&) = default;
};

void DecodeLullaby(config::ConfigWalker& w, const config::JsonValue& v, LullabyConfig& c) {
  w.Struct(v, "LullabyConfig",
           {{"verses", [&](const config::JsonValue& x) { config::fields::OptInt(w, x, c.verses); }},
            {"tune", [&](const config::JsonValue& x) { config::fields::OptString(w, x, c.tune, "string"); }}});
}
void FillLullaby(LullabyConfig& c) {
  if (!c.verses) c.verses = 3;
}
Status ValidateLullaby(const LullabyConfig& c) {
  return *c.verses > 0 ? Status::Ok() : InvalidArgument("a lullaby needs a verse");
}
void WriteLullaby(const LullabyConfig& c, nlohmann::ordered_json& j) {
  if (c.verses) j["verses"] = *c.verses;
  if (c.tune) j["tune"] = *c.tune;
}
void ViewLullaby(LullabyConfig& c) { c.tune.reset(); }

const SharingBlockKind& LullabyConfig::BlockKind() {
  static const SharingBlockKind kind = [] {
    SharingBlockDefinition<LullabyConfig> d;
    d.strategy = "Lullaby";
    d.gate = Gate::kTimeSlicingSettings;
    d.json_key = "lullabyConfig";
    d.go_type = "LullabyConfig";
    d.config_kinds = {kGpuConfigKind};
    d.decode = DecodeLullaby;
    d.fill_defaults = FillLullaby;
    d.validate = ValidateLullaby;
    d.write_fields = WriteLullaby;
    d.upstream_admission_view = ViewLullaby;
    return DefineSharingBlock(d);
  }();
  return kind;
}

const bool kRegistered = RegisterGpuConfigKinds().ok() && RegisterSharingBlock(LullabyConfig::BlockKind()).ok();
const FeatureGates kGates = FeatureGates().With(Gate::kTimeSlicingSettings, true);

std::string Doc(std::string_view kind, std::string_view sharing) {
  return R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":")" + std::string(kind) + R"(","sharing":)" +
         std::string(sharing) + "}";
}

TEST(SharingConfigTest, ARegisteredBlockIsServedByGpuConfig) {
  ASSERT_TRUE(kRegistered);
  auto c = config::DecodeStrict(Doc("GpuConfig", R"({"strategy":"Lullaby","lullabyConfig":{"tune":"brahms"}})"));
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_TRUE(c->Get<GpuConfig>().sharing->Settings<LullabyConfig>().has_value());
  EXPECT_EQ(c->Get<GpuConfig>().sharing->Settings<LullabyConfig>()->tune, "brahms");

  config::Normalize(*c, kGates);
  EXPECT_EQ(c->Get<GpuConfig>().sharing->Settings<LullabyConfig>()->verses, 3);
  EXPECT_TRUE(config::Validate(*c, kGates).ok());
  EXPECT_EQ(config::ToCanonicalJson(*c),
            R"({"kind":"GpuConfig","apiVersion":"resource.nvidia.com/v1beta1","sharing":{"strategy":"Lullaby",)"
            R"("lullabyConfig":{"verses":3,"tune":"brahms"}}})");
  // The supported strategies are the registered ones, in order.
  auto unknown = config::DecodeStrict(Doc("GpuConfig", R"({"strategy":"Opera"})"));
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(config::Validate(*unknown, kGates).message(),
            "unknown GPU sharing strategy: Opera, supported GPU sharing strategies: "
            "TimeSlicing, MPS, Lullaby");
}

TEST(SharingConfigTest, ABlockIsJudgedByItsOwnRulesAndRefusedUnderAnotherStrategy) {
  GpuConfig c;
  c.sharing = GpuSharing{"Lullaby", LullabyConfig{0, std::nullopt}};
  EXPECT_EQ(config::Validate(c, kGates).message(), "a lullaby needs a verse");
  c.sharing = GpuSharing{"TimeSlicing", LullabyConfig{2, std::nullopt}};
  EXPECT_EQ(config::Validate(c, kGates).message(), "cannot use LullabyConfig with the 'TimeSlicing' strategy");
}

TEST(SharingConfigTest, AConfigKindThatDoesNotCarryTheBlockRefusesIt) {
  auto c = config::DecodeStrict(Doc("MigDeviceConfig", R"({"strategy":"Lullaby","lullabyConfig":{}})"));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("unknown field \"sharing.lullabyConfig\""), std::string::npos)
      << c.status().message();
}

TEST(SharingConfigTest, TheAdmissionViewKeepsOnlyTheChosenBlockTrimmed) {
  GpuSharing s{"Lullaby", LullabyConfig{1, "brahms"}, MpsConfig{}};
  UpstreamSharingView(s, SharingScope{kGpuConfigKind, "GpuSharing"});
  EXPECT_EQ(s.Settings<LullabyConfig>(), (LullabyConfig{1, std::nullopt}));
  EXPECT_FALSE(s.Settings<MpsConfig>().has_value());
}

TEST(SharingConfigTest, SettingsAreValuesAndAnAbsentBlockEqualsNone) {
  GpuSharing a{"TimeSlicing"};
  GpuSharing b{"TimeSlicing"};
  EXPECT_FALSE(b.Settings<MpsConfig>().has_value());  // makes an empty slot
  EXPECT_EQ(a, b);
  a.Settings<TimeSlicingConfig>() = TimeSlicingConfig{"Long"};
  GpuSharing copy = a;
  a.Settings<TimeSlicingConfig>()->interval = "Short";
  EXPECT_EQ(copy.Settings<TimeSlicingConfig>()->interval, "Long");
  EXPECT_NE(a, copy);
  EXPECT_NE(a, b);
}

TEST(SharingConfigTest, AStrategyOrKeyIsRegisteredOnce) {
  EXPECT_TRUE(RegisterSharingBlock(MpsConfig::BlockKind()).ok());  // again: nothing changes
  SharingBlockDefinition<LullabyConfig> d;
  d.strategy = "MPS";
  d.json_key = "otherConfig";
  d.decode = DecodeLullaby;
  static const SharingBlockKind kTwin = DefineSharingBlock(d);
  EXPECT_EQ(RegisterSharingBlock(kTwin).code(), StatusCode::kAlreadyExists);
}

}  // namespace
}  // namespace nvdra::gpu
