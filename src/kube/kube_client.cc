#include "kube/kube_client.h"

#include <time.h>

#include <algorithm>
#include <cctype>
#include <thread>

#include "util/json_depth.h"
#include "util/json_reader.h"

namespace nvdra::kube {

using nlohmann::json;

namespace {

// Device names and attributes come from the driver; a string that is not
// UTF-8 is sent with replacement characters instead of throwing.
std::string DumpForRequest(const json& object) { return object.dump(-1, ' ', false, json::error_handler_t::replace); }

bool Retryable(long status) { return status == 429 || (status >= 500 && status != 501); }

std::optional<json> ParseStatusBody(const HttpResponse& r) {
  auto j = ParseJsonText(r.body, "response");
  if (!j.ok() || JsonReader(*j).ValueOr<std::string>("kind", "") != "Status") return std::nullopt;
  return std::move(j).value();
}

std::string Millis(std::chrono::nanoseconds d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + "ms";
}

}  // namespace

std::optional<std::chrono::seconds> ParseRetryAfter(std::string_view v, Clock::time_point now) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  if (v.empty()) return std::nullopt;
  if (std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isdigit(c); })) {
    // Saturate instead of overflowing: any caller clamps to far less.
    constexpr int64_t kMax = int64_t{1} << 40;
    int64_t secs = 0;
    for (char c : v) {
      secs = secs * 10 + (c - '0');
      if (secs > kMax) return std::chrono::seconds(kMax);
    }
    return std::chrono::seconds(secs);
  }
  // HTTP-date: the three forms RFC 9110 makes recipients accept, all GMT.
  std::string text(v);
  for (const char* format : {"%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT", "%a %b %d %H:%M:%S %Y"}) {
    struct tm tm {};
    const char* end = ::strptime(text.c_str(), format, &tm);
    if (end == nullptr || *end != '\0') continue;
    time_t when = ::timegm(&tm);
    if (when == static_cast<time_t>(-1)) return std::nullopt;
    // In seconds: a far-future date overflows the clock's nanoseconds.
    auto now_s = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
    return std::chrono::seconds(std::max<int64_t>(0, static_cast<int64_t>(when) - now_s));
  }
  return std::nullopt;
}

Result<json> ParseJsonBody(std::string_view body, const std::string& what) {
  NVDRA_RETURN_IF_ERROR(CheckJsonDepth(body, what + ": response"));
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Internal(what + ": response is not valid JSON");
  return j;
}

bool IsPathNotServed(const HttpResponse& r) { return r.status == 404 && !ParseStatusBody(r).has_value(); }

Status StatusFromResponse(const std::string& method, const std::string& path, const HttpResponse& r) {
  std::string reason;
  std::string message;
  if (auto s = ParseStatusBody(r)) {
    // Best effort: an odd Status body must not hide the error it reports.
    reason = JsonReader(*s).ValueOr<std::string>("reason", "");
    message = JsonReader(*s).ValueOr<std::string>("message", "");
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

void KubeClient::Sleep(std::chrono::nanoseconds d) {
  if (d <= std::chrono::nanoseconds(0)) return;
  if (options_.sleep) {
    options_.sleep(d);
  } else {
    std::this_thread::sleep_for(d);
  }
}

KubeClientStats KubeClient::stats() const {
  MutexLock l(mu_);
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

Result<HttpResponse> KubeClient::Do(const std::string& method, const std::string& path, const std::string& body,
                                    Deadline deadline, uint64_t max_body_bytes) {
  HttpRequest req{method, path, body, options_.request_timeout, max_body_bytes};
  auto backoff = std::chrono::duration_cast<std::chrono::nanoseconds>(options_.initial_backoff);
  // What the last attempt got, for the message when the deadline ends
  // retries; none before the first. Messages are made only when needed:
  // most requests need none.
  std::optional<std::string> last_outcome;
  auto past_deadline = [&](const std::string& why) {
    return DeadlineExceeded(method + " " + path + ": " + why +
                            " (last attempt: " + last_outcome.value_or("no attempt was made") + "); will retry later");
  };
  for (int attempt = 1;; ++attempt) {
    auto wait = limiter_.Reserve();
    if (deadline != kNoDeadline && clock_.SteadyNow() + wait >= deadline) {
      return past_deadline("the deadline passed" +
                           std::string(attempt > 1 ? " after " + std::to_string(attempt - 1) + " attempts"
                                                   : " before the request could be sent"));
    }
    {
      MutexLock l(mu_);
      ++stats_.requests;
      if (attempt > 1) ++stats_.retries;
      if (wait.count() > 0) ++stats_.rate_limited;
    }
    Sleep(wait);
    if (deadline != kNoDeadline) {
      // A slow server must not hold the caller past its deadline either.
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_.SteadyNow());
      req.timeout = std::clamp(left, std::chrono::milliseconds(1), options_.request_timeout);
    }
    auto r = transport_->RoundTrip(req);
    bool last = attempt >= options_.max_attempts;
    std::chrono::nanoseconds delay = backoff;
    std::string retry_after_note;
    if (!r.ok()) {
      bool transient = r.status().code() == StatusCode::kUnavailable ||
                       r.status().code() == StatusCode::kDeadlineExceeded;
      if (!transient || last) {
        if (transient && attempt > 1) {
          return Status(r.status().code(), r.status().message() + " (after " + std::to_string(attempt) + " attempts)");
        }
        return r.status();
      }
      last_outcome = r.status().message();
    } else if (!Retryable(r->status) || last) {
      return r;
    } else {
      last_outcome = "HTTP " + std::to_string(r->status);
      // Honour Retry-After on 429 and 5xx: APF, or a server going down
      // gracefully, tells us when to come back. Whatever it says is clamped.
      if (auto ra = ParseRetryAfter(r->Header("retry-after"), clock_.Now())) {
        // Clamp in seconds: the saturated value overflows nanoseconds.
        delay = std::min(*ra, std::chrono::duration_cast<std::chrono::seconds>(options_.max_retry_after));
        retry_after_note = ", and the server asked to retry after " + Millis(delay);
      }
    }
    if (deadline != kNoDeadline && clock_.SteadyNow() + delay >= deadline) {
      return past_deadline("the next attempt would start after the deadline" + retry_after_note);
    }
    Sleep(delay);
    backoff = std::min<std::chrono::nanoseconds>(backoff * 2, options_.max_backoff);
  }
}

Result<HttpResponse> KubeClient::GetOnce(const std::string& path) {
  auto wait = limiter_.Reserve();
  {
    MutexLock l(mu_);
    ++stats_.requests;
    if (wait.count() > 0) ++stats_.rate_limited;
  }
  Sleep(wait);
  return transport_->RoundTrip(HttpRequest{"GET", path, "", options_.request_timeout, kMaxObjectAnswerBytes});
}

Result<json> KubeClient::GetJson(const std::string& path, Deadline deadline, uint64_t max_body_bytes) {
  NVDRA_ASSIGN_OR_RETURN(HttpResponse r, Do("GET", path, "", deadline, max_body_bytes));
  if (r.status / 100 != 2) return StatusFromResponse("GET", path, r);
  return ParseJsonBody(r.body, "GET " + path);
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
  return GetJson(p, kNoDeadline, kMaxListAnswerBytes);
}

Result<json> KubeClient::CreateJson(const std::string& path, const json& object) {
  NVDRA_ASSIGN_OR_RETURN(HttpResponse r, Do("POST", path, DumpForRequest(object)));
  if (r.status / 100 != 2) return StatusFromResponse("POST", path, r);
  return ParseJsonBody(r.body, "POST " + path);
}

Result<json> KubeClient::UpdateJson(const std::string& path, const json& object) {
  NVDRA_ASSIGN_OR_RETURN(HttpResponse r, Do("PUT", path, DumpForRequest(object)));
  if (r.status / 100 != 2) return StatusFromResponse("PUT", path, r);
  return ParseJsonBody(r.body, "PUT " + path);
}

Result<json> KubeClient::MergePatchJson(const std::string& path, const json& patch) {
  NVDRA_ASSIGN_OR_RETURN(HttpResponse r, Do("PATCH", path, DumpForRequest(patch)));
  if (r.status / 100 != 2) return StatusFromResponse("PATCH", path, r);
  return ParseJsonBody(r.body, "PATCH " + path);
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

Result<std::string> KubeClient::ResourceApiVersion(Deadline deadline) {
  {
    MutexLock l(mu_);
    if (!resource_version_.empty()) return resource_version_;
  }
  const std::string path = "/apis/resource.k8s.io";
  NVDRA_ASSIGN_OR_RETURN(HttpResponse r, Do("GET", path, "", deadline));
  if (r.status == 404) {
    return FailedPrecondition("the API server does not serve resource.k8s.io (is DRA enabled?)");
  }
  if (r.status / 100 != 2) return StatusFromResponse("GET", path, r);
  std::vector<std::string> served;
  NVDRA_ASSIGN_OR_RETURN(json j, ParseJsonBody(r.body, "GET " + path));
  Status read = JsonReader(j).ForEach("versions", [&](const JsonReader& v) -> Status {
    NVDRA_ASSIGN_OR_RETURN(std::string version, v.OptionalOr<std::string>("version", ""));
    served.push_back(std::move(version));
    return Status::Ok();
  });
  if (!read.ok()) return read.Wrap("GET " + path + ": unexpected APIGroup");
  for (const auto& want : options_.resource_versions) {
    if (std::find(served.begin(), served.end(), want) != served.end()) {
      MutexLock l(mu_);
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
  MutexLock l(mu_);
  resource_version_.clear();
}

Result<HttpResponse> KubeClient::DoResource(const std::string& method, const std::string& rest, const std::string& body,
                                            std::string* version_used, Deadline deadline) {
  for (int round = 0;; ++round) {
    NVDRA_ASSIGN_OR_RETURN(std::string v, ResourceApiVersion(deadline));
    std::string path = "/apis/resource.k8s.io/" + v + rest;
    NVDRA_ASSIGN_OR_RETURN(HttpResponse r, Do(method, path, body, deadline));
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

Result<ResourceClaim> KubeClient::GetResourceClaim(const std::string& ns, const std::string& name, Deadline deadline) {
  std::string rest = "/namespaces/" + ns + "/resourceclaims/" + name;
  std::string v;
  NVDRA_ASSIGN_OR_RETURN(HttpResponse r, DoResource("GET", rest, "", &v, deadline));
  if (r.status / 100 != 2) {
    return StatusFromResponse("GET", "/apis/resource.k8s.io/" + v + rest, r)
        .Wrap("retrieve ResourceClaim " + ns + "/" + name);
  }
  auto claim = DecodeResourceClaim(r.body);
  if (!claim.ok()) return claim.status().Wrap("retrieve ResourceClaim " + ns + "/" + name);
  return claim;
}

Result<json> KubeClient::GetNode(const std::string& name) { return GetJson("/api/v1/nodes/" + name); }

Result<HttpResponse> KubeClient::Stream(const std::string& path, std::chrono::milliseconds timeout,
                                        const StreamSink& sink, const CancelFlag* cancel) {
  auto wait = limiter_.Reserve();
  {
    MutexLock l(mu_);
    ++stats_.requests;
    if (wait.count() > 0) ++stats_.rate_limited;
  }
  Sleep(wait);
  return transport_->Stream({"GET", path, "", timeout}, sink, cancel);
}

}  // namespace nvdra::kube
