// The seam between KubeClient and the wire. KubeClient owns policy (rate
// limits, retries, error mapping); a transport only moves one request and its
// response, so tests can script responses without a server.
#pragma once

#include "util/cancel_flag.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/status.h"

namespace nvdra::kube {

struct HttpRequest {
  std::string method;  // GET, POST, PUT, DELETE, PATCH (a JSON merge patch)
  std::string path;    // absolute path plus query, e.g. "/api/v1/nodes/n1"
  std::string body;    // JSON; empty for none
  std::chrono::milliseconds timeout{10'000};
  // The largest answer body this request accepts (what it reads: one object,
  // a list); 0: the transport's own limit. A longer answer is an error.
  uint64_t max_body_bytes = 0;
};

struct HttpResponse {
  long status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string Header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// Receives a streamed 2xx body piece by piece (a watch). Returning false ends
// the stream early.
using StreamSink = std::function<bool(std::string_view data)>;

class HttpTransport {
 public:
  virtual ~HttpTransport() = default;
  // Any HTTP status is a successful round trip. Errors are for requests that
  // got no response: kUnavailable (connect/reset/timeout, worth retrying) or
  // kFailedPrecondition (TLS verification or local config: retrying won't help).
  virtual Result<HttpResponse> RoundTrip(const HttpRequest& request) = 0;

  // A long-lived GET whose 2xx body goes to `sink` as it arrives (the
  // returned response's body stays empty); a non-2xx body is returned whole.
  // Returns when the server ends the body, the sink returns false, or
  // `cancel` is cancelled (a real transport wakes at once). A connection that
  // breaks mid-body is kUnavailable. The default delivers a RoundTrip's body
  // in one piece, which is all a scripted transport needs.
  virtual Result<HttpResponse> Stream(const HttpRequest& request, const StreamSink& sink, const CancelFlag* cancel) {
    (void)cancel;
    NVDRA_ASSIGN_OR_RETURN(HttpResponse r, RoundTrip(request));
    if (r.status / 100 == 2) {
      sink(r.body);
      r.body.clear();
    }
    return r;
  }
};

}  // namespace nvdra::kube
