// The webhook judges the configs of whatever kinds are registered, of the
// drivers those kinds name, with a kind and a driver of this test's own that
// nothing in admission/ or config/ names.
#include "admission/admission_review.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "config/config_kind.h"

namespace nvdra::admission {
namespace {

using config::ConfigKind;
using config::ConfigWalker;
using config::FeatureGates;
using config::JsonValue;
using nlohmann::json;

constexpr char kWidgetApi[] = "widgets.example.com/v1";
constexpr char kWidgetDriver[] = "widget.example.com";
constexpr char kGadgetDriver[] = "gadget.example.com";

Status ValidateMode(const std::optional<std::string>& mode, int64_t count) {
  if (count < 0) return InvalidArgument("count must not be negative");
  if (!mode || *mode == "Auto" || *mode == "Manual") return Status::Ok();
  return InvalidArgument("unknown widget mode: " + *mode);
}

void DecodeModeAndCount(ConfigWalker& w, const JsonValue& root, std::string_view go_struct,
                        std::optional<std::string>& mode, std::optional<int64_t>& count) {
  std::vector<ConfigWalker::Field> f = config::fields::TypeMetaFields(w);
  f.push_back({"mode", [&](const JsonValue& x) { config::fields::OptString(w, x, mode, "v1.WidgetMode"); }});
  f.push_back({"count", [&](const JsonValue& x) { config::fields::OptInt(w, x, count); }});
  w.Struct(root, go_struct, f);
}

// A kind whose driver upstream's webhook does not judge.
struct WidgetConfig {
  std::optional<std::string> mode;
  std::optional<int64_t> count;
  static const ConfigKind& Kind() {
    static const ConfigKind kind = config::DefineConfigKind<WidgetConfig>({
        .api_version = kWidgetApi,
        .kind = "WidgetConfig",
        .driver = kWidgetDriver,
        .decode = [](ConfigWalker& w, const JsonValue& root,
                     WidgetConfig& c) { DecodeModeAndCount(w, root, "WidgetConfig", c.mode, c.count); },
        .validate = [](const WidgetConfig& c,
                       const FeatureGates&) { return ValidateMode(c.mode, c.count.value_or(0)); },
    });
    return kind;
  }
  friend bool operator==(const WidgetConfig&, const WidgetConfig&) = default;
};

// A kind whose driver upstream's webhook judges, leaving its count to
// Prepare.
struct GadgetConfig {
  std::optional<std::string> mode;
  std::optional<int64_t> count;
  static const ConfigKind& Kind() {
    static const ConfigKind kind = config::DefineConfigKind<GadgetConfig>({
        .api_version = kWidgetApi,
        .kind = "GadgetConfig",
        .driver = kGadgetDriver,
        .decode = [](ConfigWalker& w, const JsonValue& root,
                     GadgetConfig& c) { DecodeModeAndCount(w, root, "GadgetConfig", c.mode, c.count); },
        .validate = [](const GadgetConfig& c,
                       const FeatureGates&) { return ValidateMode(c.mode, c.count.value_or(0)); },
        .upstream_admission_view = [](GadgetConfig& c) { c.count.reset(); },
    });
    return kind;
  }
  friend bool operator==(const GadgetConfig&, const GadgetConfig&) = default;
};

// The answer to a review of a v1 claim with one opaque config.
json Review(const std::string& driver, const json& parameters, WebhookScope scope = WebhookScope::kNvdra) {
  json claim = {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaim"},
      {"metadata", {{"name", "c"}, {"namespace", "default"}}},
      {"spec",
       {{"devices",
         {{"requests", {{{"name", "w"}, {"exactly", {{"deviceClassName", "widgets"}}}}}},
          {"config", {{{"requests", {"w"}}, {"opaque", {{"driver", driver}, {"parameters", parameters}}}}}}}}}}};
  json review = {{"apiVersion", "admission.k8s.io/v1"},
                 {"kind", "AdmissionReview"},
                 {"request",
                  {{"uid", "u-1"},
                   {"resource", {{"group", "resource.k8s.io"}, {"version", "v1"}, {"resource", "resourceclaims"}}},
                   {"object", claim}}}};
  HttpAnswer a = ReviewResourceClaimParameters("application/json", review.dump(), FeatureGates(), scope);
  EXPECT_EQ(a.status, 200) << a.body;
  return json::parse(a.body)["response"];
}

json Widget(const std::string& kind, const std::string& mode) {
  return {{"apiVersion", kWidgetApi}, {"kind", kind}, {"mode", mode}};
}

TEST(RegisteredKindsAdmissionTest, ADriverIsJudgedOnceItsKindsAreRegistered) {
  EXPECT_TRUE(CheckedDrivers().empty());
  EXPECT_EQ(Review(kWidgetDriver, Widget("WidgetConfig", "Sideways"))["allowed"], true);

  ASSERT_TRUE(config::RegisterConfigKind(WidgetConfig::Kind()).ok());
  EXPECT_EQ(CheckedDrivers(), std::vector<std::string>{kWidgetDriver});
  EXPECT_EQ(Review(kWidgetDriver, Widget("WidgetConfig", "Manual")), json({{"uid", "u-1"}, {"allowed", true}}));
  json refused = Review(kWidgetDriver, Widget("WidgetConfig", "Sideways"));
  EXPECT_EQ(refused["allowed"], false);
  EXPECT_EQ(refused["status"]["reason"], "Invalid");
  EXPECT_EQ(refused["status"]["message"],
            "1 configs failed to validate: object at spec.devices.config[0].opaque.parameters is invalid: unknown "
            "widget mode: Sideways");
  json unknown_field = Widget("WidgetConfig", "Auto");
  unknown_field["colour"] = "red";
  EXPECT_EQ(Review(kWidgetDriver, unknown_field)["status"]["message"],
            "1 configs failed to validate: error decoding object at spec.devices.config[0].opaque.parameters: strict "
            "decoding error: unknown field \"colour\"");
  EXPECT_EQ(Review(kWidgetDriver, Widget("SprocketConfig", "Auto"))["status"]["message"],
            "1 configs failed to validate: error decoding object at spec.devices.config[0].opaque.parameters: no kind "
            "\"SprocketConfig\" is registered for version \"widgets.example.com/v1\"; known kinds: WidgetConfig");
  // Configs of a driver no registered kind names are left alone.
  EXPECT_EQ(Review("other.example.com", Widget("WidgetConfig", "Sideways"))["allowed"], true);
}

TEST(RegisteredKindsAdmissionTest, UpstreamScopeJudgesOnlyDriversWhoseKindsHaveAnUpstreamView) {
  ASSERT_TRUE(config::RegisterConfigKind(WidgetConfig::Kind()).ok());
  ASSERT_TRUE(config::RegisterConfigKind(GadgetConfig::Kind()).ok());
  EXPECT_EQ(CheckedDrivers(WebhookScope::kNvdra), (std::vector<std::string>{kWidgetDriver, kGadgetDriver}));
  EXPECT_EQ(CheckedDrivers(WebhookScope::kUpstream), std::vector<std::string>{kGadgetDriver});

  EXPECT_EQ(Review(kWidgetDriver, Widget("WidgetConfig", "Sideways"), WebhookScope::kUpstream)["allowed"], true);
  EXPECT_EQ(Review(kGadgetDriver, Widget("GadgetConfig", "Sideways"), WebhookScope::kUpstream)["allowed"], false);
  // What the view takes out is judged in nvdra's scope only.
  json negative = Widget("GadgetConfig", "Auto");
  negative["count"] = -1;
  EXPECT_EQ(Review(kGadgetDriver, negative, WebhookScope::kUpstream)["allowed"], true);
  json refused = Review(kGadgetDriver, negative);
  EXPECT_EQ(refused["status"]["message"],
            "1 configs failed to validate: object at spec.devices.config[0].opaque.parameters is invalid: count "
            "must not be negative");
  config::Config viewed = UpstreamAdmissionView(GadgetConfig{"Auto", -1});
  EXPECT_EQ(viewed.Get<GadgetConfig>(), (GadgetConfig{"Auto", std::nullopt}));
}

}  // namespace
}  // namespace nvdra::admission
