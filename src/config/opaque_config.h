// An opaque device config as a value, whatever its kind: the config kinds
// users put into ResourceClaims and DeviceClasses are defined by the device
// kinds that serve them (config/config_kind.h), so this layer holds one of
// them without knowing which. It applies a kind's implied defaults
// (Normalize), its rules (Validate) and writes the canonical JSON form that
// the ledger keeps as the undo record of a prepared claim.
#pragma once

#include <any>
#include <concepts>
#include <string>
#include <string_view>

#include "config/feature_gates.h"
#include "util/status.h"

namespace nvdra::config {

// The group/version of nvdra's opaque config API, under which its device
// kinds register their config kinds.
inline constexpr std::string_view kApiVersion = "resource.nvidia.com/v1beta1";

class ConfigKind;

// A type that is a config kind's value: a plain struct that names its kind
// with `static const ConfigKind& Kind()` (made with DefineConfigKind).
template <class T>
concept ConfigKindValue = requires {
  { T::Kind() } -> std::same_as<const ConfigKind&>;
}
&&std::copy_constructible<T>&& std::equality_comparable<T>;

// One opaque config of any kind, as a value (copies are deep). An empty
// Config (default-constructed) has no kind.
class Config {
 public:
  Config() = default;
  template <ConfigKindValue T>
  Config(T value) : kind_(&T::Kind()), value_(std::move(value)) {}  // NOLINT: implicit by design

  // The kind of the value; null for an empty Config.
  const ConfigKind* kind() const { return kind_; }

  // The value when it is a T, else null.
  template <ConfigKindValue T>
  const T* As() const {
    return std::any_cast<T>(&value_);
  }
  template <ConfigKindValue T>
  T* As() {
    return std::any_cast<T>(&value_);
  }
  template <ConfigKindValue T>
  bool Is() const {
    return As<T>() != nullptr;
  }
  // The value as a T; throws std::bad_any_cast when it is another kind.
  template <ConfigKindValue T>
  const T& Get() const {
    return std::any_cast<const T&>(value_);
  }

  friend bool operator==(const Config& a, const Config& b);

 private:
  const ConfigKind* kind_ = nullptr;
  std::any value_;
};

// The kind's name, as documents write it; empty for an empty Config.
std::string_view KindOf(const Config& config);

// Fills in the kind's implied defaults. Gate-dependent like upstream: with a
// gate off, the config is left for Validate to reject.
void Normalize(Config& config, const FeatureGates& gates);

// The kind's rules, with upstream's messages where upstream has the kind.
Status Validate(const Config& config, const FeatureGates& gates);

// Compact JSON with a fixed member order (kind, apiVersion, then the kind's
// fields in its own fixed order). DecodeLenient(ToCanonicalJson(c)) == c.
std::string ToCanonicalJson(const Config& config);

}  // namespace nvdra::config
