// Feature gates with upstream's names, defaults, stages and `--feature-gates`
// syntax ("A=true,B=false,", as k8s.io/component-base parses it), plus the
// upstream cross-gate rules. One immutable value is built at startup and
// passed down; nothing reads gates from global state.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace nvdra::config {

enum class Gate {
  // Driver gates (upstream pkg/featuregates).
  kTimeSlicingSettings,
  kMPSSupport,
  kIMEXDaemonsWithDNSNames,
  kPassthroughSupport,
  kDynamicMIG,
  kNVMLDeviceHealthCheck,
  kComputeDomainCliques,
  kCrashOnNVLinkFabricErrors,
  kDeviceMetadata,
  // Gates of later upstream releases; recognised so that flags written for
  // those releases still parse.
  kFabricManagerPartitioning,
  kHostManagedIMEXDaemon,
  kDRAListTypeAttributes,
  kConsumableShares,
  // component-base logging gates, which upstream registers in the same set.
  kContextualLogging,
  kLoggingAlphaOptions,
  kLoggingBetaOptions,
};

enum class Stage { kAlpha, kBeta, kGA, kDeprecated };

struct GateSpec {
  Gate gate;
  std::string_view name;
  bool default_enabled;
  Stage stage;
};

class FeatureGates {
 public:
  // All gates at their defaults.
  FeatureGates() = default;

  // Parses a `--feature-gates` / FEATURE_GATES value. Empty items are
  // ignored, later items win, "AllAlpha"/"AllBeta" set every gate of that
  // stage that is not named explicitly. Errors use component-base's words:
  // "missing bool value for X", "invalid value of X=y, err: ...",
  // "unrecognized feature gate: X".
  static Result<FeatureGates> Parse(std::string_view spec);

  static std::span<const GateSpec> Known();
  // The gates as component-base lists them in `--feature-gates`' help, one
  // "Name=true|false (STAGE - default=bool)" each, AllAlpha and AllBeta
  // included, GA and deprecated gates left out, sorted.
  static std::vector<std::string> KnownFeatures();
  // `--feature-gates`' help, worded and laid out as upstream's.
  static std::string FlagHelp();
  static std::optional<Gate> FromName(std::string_view name);
  static std::string_view Name(Gate gate);

  bool Enabled(Gate gate) const;
  // Returns a copy with `gate` forced to `enabled` (tests, programmatic setup).
  FeatureGates With(Gate gate, bool enabled) const;

  // Upstream's ValidateFeatureGates rules, checked in upstream's order:
  // "feature gate A requires B to also be enabled",
  // "feature gate A is currently mutually exclusive with B".
  Status Validate() const;

  // Gates nvdra parses but does not implement yet (upstream's
  // none today):
  // FailedPrecondition naming every one enabled, so a plugin refuses to
  // start instead of running without what the gate promises.
  Status RefuseUnimplemented() const;

  // Every gate with its effective value, sorted by name: "A=true,B=false".
  std::string ToString() const;

 private:
  static constexpr size_t kCount = static_cast<size_t>(Gate::kLoggingBetaOptions) + 1;
  std::array<std::optional<bool>, kCount> explicit_{};
};

}  // namespace nvdra::config
