// The URL paths of nvdra-webhook, upstream's: POST
// /validate-resource-claim-parameters (the AdmissionReview, see
// admission_review.h) and /readyz ("ok", the chart's probes); anything else
// is Go's "404 page not found".
#pragma once

#include "admission/admission_review.h"
#include "admission/webhook_server.h"
#include "config/feature_gates.h"

namespace nvdra::admission {

inline constexpr std::string_view kValidatePath = "/validate-resource-claim-parameters";
inline constexpr std::string_view kReadyPath = "/readyz";

HttpAnswer ServeWebhook(const HttpRequest& request, const config::FeatureGates& gates,
                        WebhookScope scope = WebhookScope::kNvdra);

}  // namespace nvdra::admission
