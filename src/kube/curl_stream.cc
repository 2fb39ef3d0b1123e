// CurlTransport::Stream: a streamed GET for watches. Kept apart from the
// request/response path (curl_transport.cc) because its life cycle differs:
// its own easy handle and connection for the whole stream, no total-body
// buffering, and cancellation from another thread.
#include <curl/curl.h>

#include "kube/curl_common.h"
#include "kube/curl_transport.h"

namespace nvdra::kube {
namespace {

struct StreamState {
  CURL* curl = nullptr;
  const StreamSink* sink = nullptr;
  const std::atomic<bool>* cancel = nullptr;
  HttpResponse* response = nullptr;
  bool sink_stopped = false;
};

size_t StreamBody(char* ptr, size_t size, size_t n, void* user) {
  auto* st = static_cast<StreamState*>(user);
  long status = 0;
  curl_easy_getinfo(st->curl, CURLINFO_RESPONSE_CODE, &status);
  if (status / 100 != 2) {
    // An error answer is small; keep it whole for the caller's Status.
    if (st->response->body.size() < (1u << 20)) st->response->body.append(ptr, size * n);
    return size * n;
  }
  if (!(*st->sink)(std::string_view(ptr, size * n))) {
    st->sink_stopped = true;
    return 0;  // aborts the transfer
  }
  return size * n;
}

int StreamProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* st = static_cast<StreamState*>(user);
  return st->cancel != nullptr && st->cancel->load() ? 1 : 0;
}

}  // namespace

Result<HttpResponse> CurlTransport::Stream(const HttpRequest& req, const StreamSink& sink,
                                           const std::atomic<bool>* cancel) {
  NVDRA_ASSIGN_OR_RETURN(std::string token, token_.Get());
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return Internal("curl_easy_init failed");

  HttpResponse resp;
  StreamState st{curl, &sink, cancel, &resp};
  CURLcode rc;
  std::string detail;
  {
    curl_internal::CommonSetup setup(curl, config_, req, token, /*sends_json=*/false, &resp);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    // A peer that vanishes without a FIN is found by keepalive probes.
    curl_easy_setopt(curl, CURLOPT_TCP_KEEPIDLE, 30L);
    curl_easy_setopt(curl, CURLOPT_TCP_KEEPINTVL, 10L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, StreamBody);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &st);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, StreamProgress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &st);
    curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
    rc = curl_easy_perform(curl);
    detail = setup.Detail(rc);
  }
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(curl);
  resp.status = status;

  if (rc == CURLE_OK || (rc == CURLE_WRITE_ERROR && st.sink_stopped)) return resp;
  std::string what = "GET " + config_.server + req.path;
  if (rc == CURLE_ABORTED_BY_CALLBACK) return Unavailable(what + ": cancelled");
  if (auto tls = curl_internal::TlsFailure(rc, what, detail)) return *tls;
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    return DeadlineExceeded(what + ": stream timed out after " + std::to_string(req.timeout.count()) + " ms");
  }
  return Unavailable(what + ": stream broke: " + detail);
}

}  // namespace nvdra::kube
