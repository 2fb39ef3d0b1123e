// The GPU kind's opaque configs of gpu.nvidia.com and group/version
// `resource.nvidia.com/v1beta1`: GpuConfig, whose `sharing` holds the
// settings the sharing strategies register (sharing_config.h), and what the
// kind's other config kinds share with it (the driver, upstream's wording of
// validation errors). The device types define their own config kinds beside
// their code; RegisterGpuConfigKinds registers them all with the config
// decoder (config/config_kind.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "config/config_kind.h"
#include "config/opaque_config.h"
#include "gpu/sharing_config.h"
#include "util/status.h"

namespace nvdra::gpu {

inline constexpr std::string_view kGpuConfigKind = "GpuConfig";

struct GpuConfig {
  std::optional<GpuSharing> sharing;

  // Whether the config chooses that sharing strategy.
  bool Uses(std::string_view strategy) const { return sharing && sharing->strategy == strategy; }

  static const config::ConfigKind& Kind();
  friend bool operator==(const GpuConfig&, const GpuConfig&) = default;
};

// A config kind of the GPU kind's driver, worded as upstream words errors
// about its configs ("error validating GPU config", a mismatch names the
// device); the caller adds the operations.
template <class T>
config::ConfigKindDefinition<T> GpuConfigKindDefinition(std::string_view kind) {
  config::ConfigKindDefinition<T> d;
  d.api_version = std::string(config::kApiVersion);
  d.kind = std::string(kind);
  // The GPU kind's driver (kDriverName of gpu/gpu_device_types.h).
  d.driver = "gpu.nvidia.com";
  d.validation_error = "error validating GPU config";
  d.mismatch_names_device = true;
  return d;
}

// A GPU config kind from its rules: the definition every GPU config kind
// shares, with its decoder, defaults, validation, canonical JSON and
// upstream's admission view.
template <typename T>
config::ConfigKind DefineGpuConfigKind(
    std::string_view kind, decltype(config::ConfigKindDefinition<T>::decode) decode,
    decltype(config::ConfigKindDefinition<T>::normalize) normalize,
    decltype(config::ConfigKindDefinition<T>::validate) validate,
    decltype(config::ConfigKindDefinition<T>::write_fields) write,
    decltype(config::ConfigKindDefinition<T>::upstream_admission_view) upstream_view) {
  auto d = GpuConfigKindDefinition<T>(kind);
  d.decode = decode;
  d.normalize = normalize;
  d.validate = validate;
  d.write_fields = write;
  d.upstream_admission_view = upstream_view;
  return config::DefineConfigKind(d);
}

// Registers the sharing strategies' settings blocks, then the kind's config
// kinds with the config decoder (GpuConfig first, then each device type's, in
// the order gpu_config_pieces.cc lists them). Their rules are upstream's
// Normalize and Validate (plus: a timeSlicingConfig without an interval
// means "Default"), e.g. `"TimeSlicing" is selected as the GPU sharing
// strategy, but the "TimeSlicingSettings" feature gate is not enabled`;
// their validation errors are wrapped as "error validating GPU config", and
// upstream's admission webhook judges their driver's configs.
Status RegisterGpuConfigKinds();

}  // namespace nvdra::gpu
