// The open registry of opaque config kinds. A device kind defines each of its
// config kinds beside its own code (its apiVersion/kind, the driver whose
// claims carry it, how it is decoded, defaulted, validated and written) and
// registers it here; the decoder (config/config_decoder.h), the resolver and
// the admission webhook then serve it without naming it. A kind's definition
// is typed:
//
//   struct FooConfig {
//     std::string mode;
//     static const config::ConfigKind& Kind();
//     friend bool operator==(const FooConfig&, const FooConfig&) = default;
//   };
//   const config::ConfigKind& FooConfig::Kind() {
//     static const config::ConfigKind kind = config::DefineConfigKind<FooConfig>({
//         .api_version = "example.com/v1", .kind = "FooConfig", .driver = "foo.example.com",
//         .decode = DecodeFoo, .validate = ValidateFoo, .write_fields = WriteFoo});
//     return kind;
//   }
//   ...
//   NVDRA_RETURN_IF_ERROR(config::RegisterConfigKind(FooConfig::Kind()));
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config_walker.h"
#include "config/feature_gates.h"
#include "config/opaque_config.h"
#include "util/status.h"

namespace nvdra::config {

// A config kind with its operations on a Config that holds a value of it.
// Made by DefineConfigKind; lives for the whole program (a static of the
// value type's Kind()).
class ConfigKind {
 public:
  std::string api_version;
  std::string kind;
  // The driver whose claims carry configs of this kind ("opaque.driver").
  std::string driver;
  // How the resolver words errors about configs of this kind: the context a
  // validation error is wrapped in, and whether a config for a device of
  // another type names the device and its type (else only the request).
  std::string validation_error;
  bool mismatch_names_device = false;

  // Decodes `root` (an object whose apiVersion/kind select this kind).
  std::function<Config(ConfigWalker&, const JsonValue&)> decode;
  std::function<void(Config&, const FeatureGates&)> normalize;
  std::function<Status(const Config&, const FeatureGates&)> validate;
  // Adds the config's fields (after kind and apiVersion) to `out`.
  std::function<void(const Config&, nlohmann::ordered_json& out)> write_fields;
  std::function<bool(const Config&, const Config&)> equal;
  // Set when upstream's admission webhook judges configs of this kind's
  // driver: takes out of a config what upstream leaves to Prepare, so that
  // Validate judges only what upstream's webhook judges.
  std::function<void(Config&)> upstream_admission_view;
};

// What a kind's author writes; the operations are typed on the value T. Only
// decode is required; a missing normalize or upstream view does nothing, a
// missing validate accepts every value, a missing write_fields writes none.
template <class T>
struct ConfigKindDefinition {
  std::string api_version;
  std::string kind;
  std::string driver;
  std::string validation_error = "error validating config";
  bool mismatch_names_device = false;
  void (*decode)(ConfigWalker&, const JsonValue&, T&) = nullptr;
  void (*normalize)(T&, const FeatureGates&) = nullptr;
  Status (*validate)(const T&, const FeatureGates&) = nullptr;
  void (*write_fields)(const T&, nlohmann::ordered_json&) = nullptr;
  void (*upstream_admission_view)(T&) = nullptr;
};

template <ConfigKindValue T>
ConfigKind DefineConfigKind(const ConfigKindDefinition<T>& d) {
  ConfigKind k;
  k.api_version = d.api_version;
  k.kind = d.kind;
  k.driver = d.driver;
  k.validation_error = d.validation_error;
  k.mismatch_names_device = d.mismatch_names_device;
  k.decode = [decode = d.decode](ConfigWalker& w, const JsonValue& root) {
    T value{};
    decode(w, root, value);
    return Config(std::move(value));
  };
  if (d.normalize != nullptr) {
    k.normalize = [f = d.normalize](Config& c, const FeatureGates& gates) { f(*c.As<T>(), gates); };
  }
  if (d.validate != nullptr) {
    k.validate = [f = d.validate](const Config& c, const FeatureGates& gates) { return f(*c.As<T>(), gates); };
  }
  if (d.write_fields != nullptr) {
    k.write_fields = [f = d.write_fields](const Config& c, nlohmann::ordered_json& out) { f(*c.As<T>(), out); };
  }
  k.equal = [](const Config& a, const Config& b) { return *a.As<T>() == *b.As<T>(); };
  if (d.upstream_admission_view != nullptr) {
    k.upstream_admission_view = [f = d.upstream_admission_view](Config& c) { f(*c.As<T>()); };
  }
  return k;
}

// Makes `kind` known to the decoder and to those who ask which kinds and
// drivers there are. Registering the same kind again does nothing; another
// kind under a registered apiVersion/kind is AlreadyExists. Registering is
// meant for a program's start; lookups may run at any time.
Status RegisterConfigKind(const ConfigKind& kind);

// The registered kind of that apiVersion and kind, or null.
const ConfigKind* FindConfigKind(std::string_view api_version, std::string_view kind);

// Every registered kind, in the order of registration.
std::vector<const ConfigKind*> RegisteredConfigKinds();

}  // namespace nvdra::config
