// A small typed Kubernetes API client: the REST calls nvdra makes, with the
// client-side rate limit, per-request timeouts and retries every call needs.
// All traffic goes through one HttpTransport, so policy is testable without
// a server and the real client is tested against the test API server.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kube/http_transport.h"
#include "kube/kube_config.h"
#include "kube/rate_limiter.h"
#include "kube/resource_claim.h"
#include "util/clock.h"
#include "util/mutex.h"
#include "util/status.h"

namespace nvdra::kube {

// When a caller must have an answer by (a claim's kubelet deadline): retries
// and each request's timeout stop there. steady_clock, as the Clock's
// SteadyNow().
using Deadline = std::chrono::steady_clock::time_point;
inline constexpr Deadline kNoDeadline = Deadline::max();

struct KubeClientOptions {
  double qps = 5;  // --kube-api-qps
  int burst = 10;  // --kube-api-burst
  std::chrono::milliseconds request_timeout{10'000};
  int max_attempts = 5;  // for 429, 5xx and connection errors
  std::chrono::milliseconds initial_backoff{250};
  std::chrono::milliseconds max_backoff{8'000};
  std::chrono::seconds max_retry_after{60};
  // resource.k8s.io versions in order of preference.
  std::vector<std::string> resource_versions{"v1", "v1beta2", "v1beta1"};
  const Clock* clock = nullptr;  // SystemClock when null
  // How to wait (rate limit, backoff). Real sleep when empty; tests record.
  std::function<void(std::chrono::nanoseconds)> sleep;
};

struct KubeClientStats {
  uint64_t requests = 0;      // round trips attempted
  uint64_t retries = 0;       // of which were retries
  uint64_t rate_limited = 0;  // requests that waited for the rate limiter
};

// The largest answers the client reads, by what a request asks for: one
// object (etcd keeps an object under 1.5 MiB; its JSON with managed fields
// stays well under this), or a list (the node's slices, ComputeDomains,
// a label's Deployments or pods). Either is parsed in memory, about twenty
// times its size at worst, so the bounds keep an odd answer from taking
// gigabytes; a longer answer is a retryable error naming the request.
inline constexpr uint64_t kMaxObjectAnswerBytes = 4ull << 20;
inline constexpr uint64_t kMaxListAnswerBytes = 64ull << 20;

class KubeClient {
 public:
  KubeClient(std::unique_ptr<HttpTransport> transport, KubeClientOptions options = {});
  // A client over HTTP/1.1 (BeastTransport) for `config`; defined in
  // beast_transport.cc, part of nvdra_kube, not nvdra_kube_client.
  static std::unique_ptr<KubeClient> FromConfig(const KubeConfig& config, KubeClientOptions options = {});

  // One request with rate limiting and retries. Returns the final response
  // whatever its HTTP status; errors when no response came back, or
  // kDeadlineExceeded (retryable) when `deadline` passes, or would pass
  // before the next attempt (a backoff or Retry-After reaching beyond it).
  // `max_body_bytes`: the largest answer accepted (one object by default).
  Result<HttpResponse> Do(const std::string& method, const std::string& path, const std::string& body = "",
                          Deadline deadline = kNoDeadline, uint64_t max_body_bytes = kMaxObjectAnswerBytes)
      EXCLUDES(mu_);

  // One GET, rate limited like every request but never retried: whether the
  // server answers now. For a caller that retries on its own schedule and
  // must notice at once when a server that was down answers again.
  Result<HttpResponse> GetOnce(const std::string& path) EXCLUDES(mu_);

  // JSON helpers: a non-2xx answer becomes a Status (NotFound, AlreadyExists,
  // Conflict, PermissionDenied, InvalidArgument, Unavailable) carrying the
  // server's message.
  Result<nlohmann::json> GetJson(const std::string& path, Deadline deadline = kNoDeadline,
                                 uint64_t max_body_bytes = kMaxObjectAnswerBytes);
  Result<nlohmann::json> ListJson(const std::string& path, const std::string& label_selector = "",
                                  const std::string& field_selector = "");
  Result<nlohmann::json> CreateJson(const std::string& path, const nlohmann::json& object);
  Result<nlohmann::json> UpdateJson(const std::string& path, const nlohmann::json& object);
  // A JSON merge patch (RFC 7386): only the members `patch` names change. A
  // metadata.resourceVersion in it is a precondition (409 when stale).
  Result<nlohmann::json> MergePatchJson(const std::string& path, const nlohmann::json& patch);
  // DELETE with optional uid/resourceVersion preconditions.
  Status Delete(const std::string& path, const std::string& uid = "", const std::string& resource_version = "");

  // The resource.k8s.io version to use ("v1", "v1beta2", "v1beta1"): the most
  // preferred one the server serves, from discovery; remembered.
  Result<std::string> ResourceApiVersion(Deadline deadline = kNoDeadline) EXCLUDES(mu_);
  // Forgets the remembered version (after the server stopped serving it).
  void ForgetResourceApiVersion() EXCLUDES(mu_);

  // A claim that cannot be decoded (malformed results, too deep) is
  // InvalidArgument, never a claim with fewer devices.
  Result<ResourceClaim> GetResourceClaim(const std::string& namespace_name, const std::string& name,
                                         Deadline deadline = kNoDeadline);
  Result<nlohmann::json> GetNode(const std::string& name);

  KubeClientStats stats() const EXCLUDES(mu_);

  // A streamed GET (a watch): rate limited like every request, never retried
  // (the watcher decides: resume, relist or back off). `timeout` bounds the
  // whole stream; `cancel` ends it from another thread.
  Result<HttpResponse> Stream(const std::string& path, std::chrono::milliseconds timeout, const StreamSink& sink,
                              const CancelFlag* cancel);

  // Percent-encodes a query parameter value.
  static std::string QueryEscape(const std::string& s);

 private:
  // A resource.k8s.io request that re-discovers the served version once when
  // the server answers "404 page not found" for the group version.
  Result<HttpResponse> DoResource(const std::string& method, const std::string& rest, const std::string& body,
                                  std::string* version_used, Deadline deadline = kNoDeadline);
  void Sleep(std::chrono::nanoseconds d);

  std::unique_ptr<HttpTransport> transport_;
  KubeClientOptions options_;
  const Clock& clock_;
  RateLimiter limiter_;
  mutable Mutex mu_;
  std::string resource_version_ GUARDED_BY(mu_);
  KubeClientStats stats_ GUARDED_BY(mu_);
};

// How long a Retry-After header asks us to wait: delta-seconds (any number
// of digits; huge values saturate) or an HTTP-date (IMF-fixdate, RFC 850 or
// asctime form) relative to `now`. nullopt for anything else, so the caller
// falls back to its own backoff. Never throws; the caller clamps.
std::optional<std::chrono::seconds> ParseRetryAfter(std::string_view value, Clock::time_point now);

// Parses a response body as JSON, refusing documents nested deeper than
// kMaxJsonDepth; errors name `what`.
Result<nlohmann::json> ParseJsonBody(std::string_view body, const std::string& what);

// Maps a non-2xx response to a Status with the API server's message.
Status StatusFromResponse(const std::string& method, const std::string& path, const HttpResponse& response);
// True when a 404 is the server's "no such path" (group version not served)
// rather than a metav1.Status for a missing object.
bool IsPathNotServed(const HttpResponse& response);

}  // namespace nvdra::kube
