#include "admission/webhook_routes.h"

namespace nvdra::admission {

HttpAnswer ServeWebhook(const HttpRequest& request, const config::FeatureGates& gates, WebhookScope scope) {
  std::string_view path = request.target;
  path = path.substr(0, path.find('?'));
  // Like upstream's handlers, any method: the API server POSTs.
  if (path == kValidatePath) return ReviewResourceClaimParameters(request.content_type, request.body, gates, scope);
  if (path == kReadyPath) return {200, "text/plain; charset=utf-8", "ok"};
  return TextError(404, "404 page not found");
}

}  // namespace nvdra::admission
