// CurlTransport::Stream: a streamed GET for watches. Kept apart from the
// request/response path (curl_transport.cc) because its life cycle differs:
// its own easy handle and connection for the whole stream, no total-body
// buffering, and cancellation from another thread.
#include <curl/curl.h>

#include <algorithm>
#include <cctype>

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

size_t StreamHeader(char* ptr, size_t size, size_t n, void* user) {
  std::string line(ptr, size * n);
  auto colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    std::string value = line.substr(colon + 1);
    auto b = value.find_first_not_of(" \t");
    auto e = value.find_last_not_of(" \t\r\n");
    value = b == std::string::npos ? "" : value.substr(b, e - b + 1);
    (*static_cast<std::map<std::string, std::string>*>(user))[name] = value;
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
  std::string url = config_.server + req.path;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(req.timeout.count()));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
  curl_easy_setopt(curl, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
  // A peer that vanishes without a FIN is found by keepalive probes.
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPIDLE, 30L);
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPINTVL, 10L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, StreamBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &st);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, StreamHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &resp.headers);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, StreamProgress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &st);
  curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);

  if (config_.insecure_skip_tls_verify) {
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  curl_blob ca{}, cert{}, key{};
  if (!config_.ca_pem.empty()) {
    ca = {config_.ca_pem.data(), config_.ca_pem.size(), CURL_BLOB_NOCOPY};
    curl_easy_setopt(curl, CURLOPT_CAINFO_BLOB, &ca);
  } else if (!config_.ca_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_CAINFO, config_.ca_file.c_str());
  }
  if (!config_.client_cert_pem.empty()) {
    cert = {config_.client_cert_pem.data(), config_.client_cert_pem.size(), CURL_BLOB_NOCOPY};
    curl_easy_setopt(curl, CURLOPT_SSLCERT_BLOB, &cert);
  } else if (!config_.client_cert_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLCERT, config_.client_cert_file.c_str());
  }
  if (!config_.client_key_pem.empty()) {
    key = {config_.client_key_pem.data(), config_.client_key_pem.size(), CURL_BLOB_NOCOPY};
    curl_easy_setopt(curl, CURLOPT_SSLKEY_BLOB, &key);
  } else if (!config_.client_key_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLKEY, config_.client_key_file.c_str());
  }

  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Accept: application/json");
  headers = curl_slist_append(headers, "User-Agent: nvdra");
  std::string auth;
  if (!token.empty()) {
    auth = "Authorization: Bearer " + token;
    headers = curl_slist_append(headers, auth.c_str());
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);

  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
  CURLcode rc = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(curl);
  resp.status = status;

  if (rc == CURLE_OK || (rc == CURLE_WRITE_ERROR && st.sink_stopped)) return resp;
  std::string what = "GET " + config_.server + req.path;
  if (rc == CURLE_ABORTED_BY_CALLBACK) return Unavailable(what + ": cancelled");
  std::string detail = errbuf[0] ? errbuf : curl_easy_strerror(rc);
  switch (rc) {
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
      return FailedPrecondition(what + ": TLS verification of the API server failed (" + detail + ")");
    case CURLE_SSL_CERTPROBLEM:
      return FailedPrecondition(what + ": the client certificate or key cannot be used (" + detail + ")");
    case CURLE_OPERATION_TIMEDOUT:
      return DeadlineExceeded(what + ": stream timed out after " + std::to_string(req.timeout.count()) + " ms");
    default:
      return Unavailable(what + ": stream broke: " + detail);
  }
}

}  // namespace nvdra::kube
