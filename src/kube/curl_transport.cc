#include "kube/curl_transport.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>

namespace nvdra::kube {
namespace {

struct GlobalInit {
  GlobalInit() { curl_global_init(CURL_GLOBAL_DEFAULT); }
};

size_t WriteBody(char* ptr, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(ptr, size * n);
  return size * n;
}

size_t WriteHeader(char* ptr, size_t size, size_t n, void* user) {
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

}  // namespace

CurlTransport::CurlTransport(KubeConfig config) : config_(std::move(config)), token_(config_) {
  static GlobalInit init;  // curl_global_init is not thread-safe; run it once.
}

CurlTransport::~CurlTransport() {
  for (void* h : idle_) curl_easy_cleanup(static_cast<CURL*>(h));
}

void* CurlTransport::Acquire() {
  {
    MutexLock l(mu_);
    if (!idle_.empty()) {
      void* h = idle_.back();
      idle_.pop_back();
      return h;
    }
  }
  return curl_easy_init();
}

void CurlTransport::Release(void* handle) {
  MutexLock l(mu_);
  idle_.push_back(handle);
}

Result<HttpResponse> CurlTransport::RoundTrip(const HttpRequest& req) {
  NVDRA_ASSIGN_OR_RETURN(std::string token, token_.Get());
  CURL* curl = static_cast<CURL*>(Acquire());
  if (curl == nullptr) return Internal("curl_easy_init failed");
  curl_easy_reset(curl);  // keeps the connection cache, drops per-request options

  HttpResponse resp;
  std::string url = config_.server + req.path;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(req.timeout.count()));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(std::min<int64_t>(req.timeout.count(), 5000)));
  curl_easy_setopt(curl, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, WriteBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &resp.body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, WriteHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &resp.headers);
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  if (!req.body.empty() || req.method == "POST" || req.method == "PUT") {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, req.body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(req.body.size()));
  }

  // TLS
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
  headers = curl_slist_append(headers, "Content-Type: application/json");
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
  Release(curl);

  if (rc != CURLE_OK) {
    std::string detail = errbuf[0] ? errbuf : curl_easy_strerror(rc);
    std::string what = req.method + " " + config_.server + req.path;
    switch (rc) {
      case CURLE_PEER_FAILED_VERIFICATION:
      case CURLE_SSL_CACERT_BADFILE:
        return FailedPrecondition(what + ": TLS verification of the API server failed (" + detail +
                                  "); check the certificate-authority in the kubeconfig or the "
                                  "service-account ca.crt");
      case CURLE_SSL_CERTPROBLEM:
        return FailedPrecondition(what + ": the client certificate or key cannot be used (" + detail + ")");
      case CURLE_OPERATION_TIMEDOUT:
        return DeadlineExceeded(what + ": timed out after " + std::to_string(req.timeout.count()) + " ms (" +
                                detail + ")");
      default:
        return Unavailable(what + ": " + detail);
    }
  }
  resp.status = status;
  return resp;
}

}  // namespace nvdra::kube
