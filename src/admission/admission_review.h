// The validating admission webhook's decision, without any transport: an
// AdmissionReview (admission.k8s.io/v1) for a ResourceClaim or a
// ResourceClaimTemplate of resource.k8s.io v1, v1beta2 or v1beta1 in, the
// HTTP answer out. Every opaque config of a driver whose config kinds are
// registered (the program registers them at start) is decoded strictly,
// normalized and validated by the same code the kubelet plugins run at
// prepare (config/config_decoder.h, config/opaque_config.h), so a claim is
// admitted exactly when its configs would prepare. Paths, status
// codes and messages are upstream's (cmd/webhook of the Go driver), e.g.
//   2 configs failed to validate: object at spec.devices.config[0].opaque.parameters
//   is invalid: unknown time-slice interval: ...; object at ... is invalid: ...
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/feature_gates.h"
#include "config/opaque_config.h"

namespace nvdra::admission {

// What the webhook refuses. kNvdra (the default): every config the plugins
// would refuse at Prepare, of every driver whose config kinds are registered
// (config/config_kind.h). kUpstream: what upstream's webhook refuses, no
// more: the configs of the drivers whose kinds carry an upstream admission
// view (strictly decoded, normalized, validated), without the checks
// upstream makes only at Prepare, which the view takes out; a claim it
// admits may then fail at Prepare, as with upstream's driver.
enum class WebhookScope { kNvdra, kUpstream };

// "nvdra" or "upstream" (the --scope flag); nullopt for anything else.
std::optional<WebhookScope> ParseWebhookScope(std::string_view text);

// The drivers whose configs are checked in `scope`, as the registered config
// kinds name them, in the order their first kinds were registered.
std::vector<std::string> CheckedDrivers(WebhookScope scope = WebhookScope::kNvdra);

// `config` with what upstream's webhook leaves to Prepare taken out (its
// kind's upstream admission view), so that Validate judges only what
// upstream's Validate judges.
config::Config UpstreamAdmissionView(config::Config config);

// The API server's limit on spec.devices.config of a claim (and of a
// template's claim spec). It refuses more before any webhook is called, so
// a review with more comes from someone else: it is refused before any
// config is judged, with the API server's own message
// ("spec.devices.config: Too many: <n>: must have at most 32 items").
inline constexpr size_t kMaxConfigsPerClaim = 32;

// An HTTP answer: status code, Content-Type and body.
struct HttpAnswer {
  int status = 200;
  std::string content_type;
  std::string body;
};

// A plain-text error answer as Go's http.Error writes it (the message and a
// newline).
HttpAnswer TextError(int status, std::string_view message);

// The answer to one POST of /validate-resource-claim-parameters:
// 415 unless the content type is application/json; 400 for a body that is
// no AdmissionReview v1 with a request; otherwise 200 with an AdmissionReview
// whose response allows the object, or refuses it with reason BadRequest (an
// object of another resource or shape) or Invalid (configs that fail).
HttpAnswer ReviewResourceClaimParameters(std::string_view content_type, std::string_view body,
                                         const config::FeatureGates& gates, WebhookScope scope = WebhookScope::kNvdra);

}  // namespace nvdra::admission
