// The seam between KubeClient and the wire. KubeClient owns policy (rate
// limits, retries, error mapping); a transport only moves one request and its
// response, so tests can script responses without a server.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "util/status.h"

namespace nvdra::kube {

struct HttpRequest {
  std::string method;  // GET, POST, PUT, DELETE
  std::string path;    // absolute path plus query, e.g. "/api/v1/nodes/n1"
  std::string body;    // JSON; empty for none
  std::chrono::milliseconds timeout{10'000};
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

class HttpTransport {
 public:
  virtual ~HttpTransport() = default;
  // Any HTTP status is a successful round trip. Errors are for requests that
  // got no response: kUnavailable (connect/reset/timeout, worth retrying) or
  // kFailedPrecondition (TLS verification or local config: retrying won't help).
  virtual Result<HttpResponse> RoundTrip(const HttpRequest& request) = 0;
};

}  // namespace nvdra::kube
