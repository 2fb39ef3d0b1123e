#include "kube/kube_client.h"

#include <algorithm>
#include <thread>

#include "kube/curl_transport.h"

namespace nvdra::kube {

using nlohmann::json;

namespace {

bool Retryable(long status) { return status == 429 || (status >= 500 && status != 501); }

std::optional<json> ParseStatusBody(const HttpResponse& r) {
  try {
    json j = json::parse(r.body);
    if (j.is_object() && j.value("kind", "") == "Status") return j;
  } catch (...) {
  }
  return std::nullopt;
}

}  // namespace

bool IsPathNotServed(const HttpResponse& r) { return r.status == 404 && !ParseStatusBody(r).has_value(); }

Status StatusFromResponse(const std::string& method, const std::string& path, const HttpResponse& r) {
  std::string reason;
  std::string message;
  if (auto s = ParseStatusBody(r)) {
    reason = s->value("reason", "");
    message = s->value("message", "");
  } else {
    message = r.body.substr(0, 200);
    while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  }
  std::string text = method + " " + path + ": " + (message.empty() ? "no message" : message) + " (HTTP " +
                     std::to_string(r.status) + (reason.empty() ? "" : " " + reason) + ")";
  if (r.status == 404) return NotFound(text);
  if (r.status == 409) return reason == "AlreadyExists" ? AlreadyExists(text) : Conflict(text);
  if (r.status == 401 || r.status == 403) return PermissionDenied(text);
  if (r.status == 400 || r.status == 422 || r.status == 405) return InvalidArgument(text);
  if (r.status == 429 || r.status >= 500) return Unavailable(text);
  return Internal(text);
}

KubeClient::KubeClient(std::unique_ptr<HttpTransport> transport, KubeClientOptions options)
    : transport_(std::move(transport)),
      options_(std::move(options)),
      clock_(options_.clock ? *options_.clock : SystemClock::Get()),
      limiter_(options_.qps, options_.burst, clock_) {}

std::unique_ptr<KubeClient> KubeClient::FromConfig(const KubeConfig& config, KubeClientOptions options) {
  return std::make_unique<KubeClient>(std::make_unique<CurlTransport>(config), std::move(options));
}

void KubeClient::Sleep(std::chrono::nanoseconds d) {
  if (d <= std::chrono::nanoseconds(0)) return;
  if (options_.sleep) {
    options_.sleep(d);
  } else {
    std::this_thread::sleep_for(d);
  }
}

KubeClientStats KubeClient::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return stats_;
}

std::string KubeClient::QueryEscape(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

Result<HttpResponse> KubeClient::Do(const std::string& method, const std::string& path, const std::string& body) {
  HttpRequest req{method, path, body, options_.request_timeout};
  auto backoff = std::chrono::duration_cast<std::chrono::nanoseconds>(options_.initial_backoff);
  for (int attempt = 1;; ++attempt) {
    auto wait = limiter_.Reserve();
    {
      std::lock_guard<std::mutex> l(mu_);
      ++stats_.requests;
      if (attempt > 1) ++stats_.retries;
      if (wait.count() > 0) ++stats_.rate_limited;
    }
    Sleep(wait);
    auto r = transport_->RoundTrip(req);
    bool last = attempt >= options_.max_attempts;
    std::chrono::nanoseconds delay = backoff;
    if (!r.ok()) {
      bool transient = r.status().code() == StatusCode::kUnavailable ||
                       r.status().code() == StatusCode::kDeadlineExceeded;
      if (!transient || last) {
        if (transient && attempt > 1) {
          return Status(r.status().code(), r.status().message() + " (after " + std::to_string(attempt) + " attempts)");
        }
        return r.status();
      }
    } else if (!Retryable(r->status) || last) {
      return r;
    } else {
      // Honour Retry-After (seconds) on 429 and 5xx: APF, or a server going
      // down gracefully, tells us when to come back.
      std::string ra = r->Header("retry-after");
      if (!ra.empty() && std::all_of(ra.begin(), ra.end(), ::isdigit)) {
        auto secs = std::min<long long>(std::stoll(ra), options_.max_retry_after.count());
        delay = std::chrono::seconds(secs);
      }
    }
    Sleep(delay);
    backoff = std::min<std::chrono::nanoseconds>(backoff * 2, options_.max_backoff);
  }
}

Result<json> KubeClient::GetJson(const std::string& path) {
  NVDRA_ASSIGN_OR_RETURN(HttpResponse r, Do("GET", path));
  if (r.status / 100 != 2) return StatusFromResponse("GET", path, r);
  try {
    return json::parse(r.body);
  } catch (const json::exception& e) {
    return Internal("GET " + path + ": response is not valid JSON: " + e.what());
  }
}

Result<json> KubeClient::ListJson(const std::string& path, const std::string& label_selector,
                                  const std::string& field_selector) {
  std::string p = path;
  char sep = p.find('?') == std::string::npos ? '?' : '&';
  if (!label_selector.empty()) {
    p += sep + std::string("labelSelector=") + QueryEscape(label_selector);
    sep = '&';
  }
  if (!field_selector.empty()) p += sep + std::string("fieldSelector=") + QueryEscape(field_selector);
  return GetJson(p);
}

Result<json> KubeClient::CreateJson(const std::string& path, const json& object) {
  NVDRA_ASSIGN_OR_RETURN(HttpResponse r, Do("POST", path, object.dump()));
  if (r.status / 100 != 2) return StatusFromResponse("POST", path, r);
  try {
    return json::parse(r.body);
  } catch (const json::exception& e) {
    return Internal("POST " + path + ": response is not valid JSON: " + e.what());
  }
}

Result<json> KubeClient::UpdateJson(const std::string& path, const json& object) {
  NVDRA_ASSIGN_OR_RETURN(HttpResponse r, Do("PUT", path, object.dump()));
  if (r.status / 100 != 2) return StatusFromResponse("PUT", path, r);
  try {
    return json::parse(r.body);
  } catch (const json::exception& e) {
    return Internal("PUT " + path + ": response is not valid JSON: " + e.what());
  }
}

Status KubeClient::Delete(const std::string& path, const std::string& uid, const std::string& resource_version) {
  std::string body;
  if (!uid.empty() || !resource_version.empty()) {
    json opts = {{"kind", "DeleteOptions"}, {"apiVersion", "v1"}, {"preconditions", json::object()}};
    if (!uid.empty()) opts["preconditions"]["uid"] = uid;
    if (!resource_version.empty()) opts["preconditions"]["resourceVersion"] = resource_version;
    body = opts.dump();
  }
  NVDRA_ASSIGN_OR_RETURN(HttpResponse r, Do("DELETE", path, body));
  if (r.status / 100 != 2) return StatusFromResponse("DELETE", path, r);
  return Status::Ok();
}

Result<std::string> KubeClient::ResourceApiVersion() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!resource_version_.empty()) return resource_version_;
  }
  const std::string path = "/apis/resource.k8s.io";
  NVDRA_ASSIGN_OR_RETURN(HttpResponse r, Do("GET", path));
  if (r.status == 404) {
    return FailedPrecondition("the API server does not serve resource.k8s.io (is DRA enabled?)");
  }
  if (r.status / 100 != 2) return StatusFromResponse("GET", path, r);
  std::vector<std::string> served;
  try {
    json j = json::parse(r.body);
    for (const auto& v : j.value("versions", json::array())) served.push_back(v.value("version", ""));
  } catch (const json::exception& e) {
    return Internal("GET " + path + ": discovery document is not valid JSON: " + e.what());
  }
  for (const auto& want : options_.resource_versions) {
    if (std::find(served.begin(), served.end(), want) != served.end()) {
      std::lock_guard<std::mutex> l(mu_);
      resource_version_ = want;
      return want;
    }
  }
  std::string list;
  for (const auto& s : served) list += (list.empty() ? "" : ", ") + s;
  return FailedPrecondition("the API server serves resource.k8s.io versions [" + list +
                            "], none of which nvdra supports (v1, v1beta2, v1beta1)");
}

void KubeClient::ForgetResourceApiVersion() {
  std::lock_guard<std::mutex> l(mu_);
  resource_version_.clear();
}

Result<HttpResponse> KubeClient::DoResource(const std::string& method, const std::string& rest,
                                            const std::string& body, std::string* version_used) {
  for (int round = 0;; ++round) {
    NVDRA_ASSIGN_OR_RETURN(std::string v, ResourceApiVersion());
    std::string path = "/apis/resource.k8s.io/" + v + rest;
    NVDRA_ASSIGN_OR_RETURN(HttpResponse r, Do(method, path, body));
    if (IsPathNotServed(r)) {
      // The server stopped serving that version (downgrade, or a stale
      // discovery answer): rediscover once. A 404 for a missing object is a
      // Status body and never gets here.
      ForgetResourceApiVersion();
      if (round == 0) continue;
      // Never let this look like "object not found": callers unprepare
      // claims on NotFound.
      return Unavailable(method + " " + path + ": the API server does not serve resource.k8s.io/" + v +
                         " although discovery listed it; will retry");
    }
    if (version_used) *version_used = v;
    return r;
  }
}

Result<ResourceClaim> KubeClient::GetResourceClaim(const std::string& ns, const std::string& name) {
  std::string rest = "/namespaces/" + ns + "/resourceclaims/" + name;
  std::string v;
  NVDRA_ASSIGN_OR_RETURN(HttpResponse r, DoResource("GET", rest, "", &v));
  if (r.status / 100 != 2) {
    return StatusFromResponse("GET", "/apis/resource.k8s.io/" + v + rest, r)
        .Wrap("retrieve ResourceClaim " + ns + "/" + name);
  }
  auto claim = DecodeResourceClaim(r.body);
  if (!claim.ok()) return claim.status().Wrap("retrieve ResourceClaim " + ns + "/" + name);
  return claim;
}

ClaimCheckResult KubeClient::CheckClaim(const std::string& ns, const std::string& name, const std::string& uid) {
  ClaimCheckResult out;
  auto claim = GetResourceClaim(ns, name);
  if (!claim.ok()) {
    out.check = claim.status().code() == StatusCode::kNotFound ? ClaimCheck::kNotFound : ClaimCheck::kError;
    out.status = claim.status();
    return out;
  }
  // Same order and words as the Go kubelet plugin helper.
  if (!claim->allocated) {
    out.check = ClaimCheck::kNotAllocated;
    out.status = FailedPrecondition("claim " + ns + "/" + name + " not allocated");
  } else if (claim->uid != uid) {
    out.check = ClaimCheck::kReplaced;
    out.status = FailedPrecondition("claim " + ns + "/" + name + " got replaced");
  } else {
    out.check = ClaimCheck::kOk;
  }
  out.claim = std::move(claim).value();
  return out;
}

Result<json> KubeClient::GetNode(const std::string& name) { return GetJson("/api/v1/nodes/" + name); }

Result<HttpResponse> KubeClient::Stream(const std::string& path, std::chrono::milliseconds timeout,
                                        const StreamSink& sink, const std::atomic<bool>* cancel) {
  auto wait = limiter_.Reserve();
  {
    std::lock_guard<std::mutex> l(mu_);
    ++stats_.requests;
    if (wait.count() > 0) ++stats_.rate_limited;
  }
  Sleep(wait);
  return transport_->Stream({"GET", path, "", timeout}, sink, cancel);
}

}  // namespace nvdra::kube
