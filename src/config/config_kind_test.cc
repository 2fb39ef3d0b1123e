// The registry with a config kind of this test's own, which nothing in
// config/ names: once registered, the decoder decodes it strictly and
// leniently, its defaults, rules and canonical JSON apply through Config,
// and the resolver words its errors as the kind asks.
#include "config/config_kind.h"

#include <gtest/gtest.h>

#include "config/config_decoder.h"
#include "config/config_resolver.h"

namespace nvdra::config {
namespace {

constexpr char kWidgetApi[] = "widgets.example.com/v1";
constexpr char kWidgetDriver[] = "widget.example.com";

struct WidgetConfig {
  std::optional<std::string> mode;
  std::optional<int64_t> count;
  static const ConfigKind& Kind();
  friend bool operator==(const WidgetConfig&, const WidgetConfig&) = default;
};

void DecodeWidget(ConfigWalker& w, const JsonValue& root, WidgetConfig& c) {
  std::vector<ConfigWalker::Field> f = fields::TypeMetaFields(w);
  f.push_back({"mode", [&](const JsonValue& x) { fields::OptString(w, x, c.mode, "v1.WidgetMode"); }});
  f.push_back({"count", [&](const JsonValue& x) { fields::OptInt(w, x, c.count); }});
  w.Struct(root, "WidgetConfig", f);
}

const ConfigKind& WidgetConfig::Kind() {
  static const ConfigKind kind = DefineConfigKind<WidgetConfig>({
      .api_version = kWidgetApi,
      .kind = "WidgetConfig",
      .driver = kWidgetDriver,
      .validation_error = "error validating widget config",
      .decode = DecodeWidget,
      .normalize =
          [](WidgetConfig& c, const FeatureGates&) {
            if (!c.mode) c.mode = "Auto";
          },
      .validate =
          [](const WidgetConfig& c, const FeatureGates&) {
            if (!c.mode || *c.mode == "Auto" || *c.mode == "Manual") return Status::Ok();
            return InvalidArgument("unknown widget mode: " + *c.mode);
          },
      .write_fields =
          [](const WidgetConfig& c, nlohmann::ordered_json& j) {
            if (c.mode) j["mode"] = *c.mode;
            if (c.count) j["count"] = *c.count;
          },
  });
  return kind;
}

// Another kind under the same apiVersion/kind.
struct ImpostorConfig {
  static const ConfigKind& Kind() {
    static const ConfigKind kind = DefineConfigKind<ImpostorConfig>({
        .api_version = kWidgetApi,
        .kind = "WidgetConfig",
        .driver = kWidgetDriver,
        .decode = [](ConfigWalker&, const JsonValue&, ImpostorConfig&) {},
    });
    return kind;
  }
  friend bool operator==(const ImpostorConfig&, const ImpostorConfig&) = default;
};

std::string Widget(std::string_view rest) {
  return std::string(R"({"apiVersion":"widgets.example.com/v1","kind":"WidgetConfig")") + (rest.empty() ? "" : ",") +
         std::string(rest) + "}";
}

TEST(ConfigKindTest, AKindIsDecodedOnlyOnceRegistered) {
  auto before = DecodeStrict(Widget(R"("mode":"Manual")"));
  ASSERT_FALSE(before.ok());
  EXPECT_EQ(before.status().message(),
            "no kind \"WidgetConfig\" is registered for version \"widgets.example.com/v1\"; no config kinds are "
            "registered");
  EXPECT_TRUE(RegisteredConfigKinds().empty());

  ASSERT_TRUE(RegisterConfigKind(WidgetConfig::Kind()).ok());
  auto c = DecodeStrict(Widget(R"("mode":"Manual","count":3)"));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(KindOf(*c), "WidgetConfig");
  ASSERT_TRUE(c->Is<WidgetConfig>());
  EXPECT_EQ(c->Get<WidgetConfig>(), (WidgetConfig{"Manual", 3}));
  EXPECT_EQ(FindConfigKind(kWidgetApi, "WidgetConfig"), &WidgetConfig::Kind());
  EXPECT_EQ(FindConfigKind(kApiVersion, "WidgetConfig"), nullptr);
}

TEST(ConfigKindTest, ARegisteredKindGetsTheDecodersStrictnessAndMessages) {
  ASSERT_TRUE(RegisterConfigKind(WidgetConfig::Kind()).ok());
  EXPECT_EQ(DecodeStrict(Widget(R"("mode":"Manual","colour":"red","mode":"Auto")")).status().message(),
            "strict decoding error: unknown field \"colour\", duplicate field \"mode\"");
  EXPECT_EQ(DecodeStrict(Widget(R"("count":1.5)")).status().message(),
            "json: cannot unmarshal number 1.5 into Go struct field WidgetConfig.count of type int");
  auto lenient = DecodeLenient(Widget(R"("colour":"red","mode":"Auto","count":"x")"));
  ASSERT_TRUE(lenient.ok()) << lenient.status().message();
  EXPECT_EQ(lenient->Get<WidgetConfig>(), (WidgetConfig{"Auto", std::nullopt}));
  // The registry names what it has when a document asks for something else.
  EXPECT_EQ(DecodeStrict(R"({"apiVersion":"widgets.example.com/v1","kind":"GadgetConfig"})").status().message(),
            "no kind \"GadgetConfig\" is registered for version \"widgets.example.com/v1\"; known kinds: WidgetConfig");
  EXPECT_EQ(DecodeStrict(R"({"apiVersion":"widgets.example.com/v2","kind":"WidgetConfig"})").status().message(),
            "no kind \"WidgetConfig\" is registered for version \"widgets.example.com/v2\"; opaque configs of this "
            "driver use apiVersion \"widgets.example.com/v1\"");
}

TEST(ConfigKindTest, DefaultsRulesAndCanonicalJsonAreTheKinds) {
  ASSERT_TRUE(RegisterConfigKind(WidgetConfig::Kind()).ok());
  Config c = WidgetConfig{};
  Normalize(c, FeatureGates());
  EXPECT_EQ(c.Get<WidgetConfig>().mode, "Auto");
  EXPECT_TRUE(Validate(c, FeatureGates()).ok());
  Config bad = WidgetConfig{"Sideways", 2};
  EXPECT_EQ(Validate(bad, FeatureGates()).message(), "unknown widget mode: Sideways");
  const std::string json = ToCanonicalJson(bad);
  EXPECT_EQ(json, R"({"kind":"WidgetConfig","apiVersion":"widgets.example.com/v1","mode":"Sideways","count":2})");
  auto again = DecodeLenient(json);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, bad);
  EXPECT_NE(*again, c);
  EXPECT_EQ(Config(), Config());
  EXPECT_NE(Config(), c);
  EXPECT_EQ(KindOf(Config()), "");
}

TEST(ConfigKindTest, RegisteringAgainIsANoOpButAnotherKindUnderTheSameNameIsRefused) {
  ASSERT_TRUE(RegisterConfigKind(WidgetConfig::Kind()).ok());
  EXPECT_TRUE(RegisterConfigKind(WidgetConfig::Kind()).ok());
  Status clash = RegisterConfigKind(ImpostorConfig::Kind());
  EXPECT_EQ(clash.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(clash.message(), "config kind WidgetConfig of widgets.example.com/v1 is registered already");
  ASSERT_EQ(RegisteredConfigKinds().size(), 1u);
  EXPECT_EQ(RegisteredConfigKinds()[0]->driver, kWidgetDriver);
  ConfigKind nameless;
  EXPECT_EQ(RegisterConfigKind(nameless).code(), StatusCode::kInvalidArgument);
}

TEST(ConfigKindTest, TheResolverAppliesAndWordsARegisteredKind) {
  ASSERT_TRUE(RegisterConfigKind(WidgetConfig::Kind()).ok());
  DriverConfigRules rules{kWidgetDriver, {{"widget", "WidgetConfig"}, {"gizmo", "GizmoConfig"}}, {WidgetConfig{}}, ""};
  auto type_of = [](const model::AllocationResult& r) { return r.device.substr(0, r.device.find('-')); };
  std::vector<model::AllocationResult> results = {{"r", kWidgetDriver, "node-1", "widget-0", false, ""}};
  ClaimConfig manual{ConfigSource::kFromClaim, "", {"r"}, kWidgetDriver, Widget(R"("mode":"Manual")")};
  auto groups = ResolveConfigs(rules, {manual}, results, type_of, FeatureGates());
  ASSERT_TRUE(groups.ok()) << groups.status().message();
  ASSERT_EQ(groups->size(), 1u);
  EXPECT_EQ((*groups)[0].config.Get<WidgetConfig>().mode, "Manual");
  // Without a config of the claim's, the driver's default, normalized.
  auto defaults = ResolveConfigs(rules, {}, results, type_of, FeatureGates());
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ((*defaults)[0].config.Get<WidgetConfig>().mode, "Auto");

  ClaimConfig sideways = manual;
  sideways.parameters_json = Widget(R"("mode":"Sideways")");
  EXPECT_EQ(ResolveConfigs(rules, {sideways}, results, type_of, FeatureGates()).status().message(),
            "error validating widget config: unknown widget mode: Sideways");
  // The kind does not ask for the device to be named in a mismatch.
  std::vector<model::AllocationResult> gizmo = {{"r", kWidgetDriver, "node-1", "gizmo-0", false, ""}};
  EXPECT_EQ(ResolveConfigs(rules, {manual}, gizmo, type_of, FeatureGates()).status().message(),
            "cannot apply WidgetConfig to request: r");
}

}  // namespace
}  // namespace nvdra::config
