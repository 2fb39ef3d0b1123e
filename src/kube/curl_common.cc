#include "kube/curl_common.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace nvdra::kube::curl_internal {
namespace {

size_t CollectHeader(char* ptr, size_t size, size_t n, void* user) {
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

CommonSetup::CommonSetup(CURL* curl, const KubeConfig& config, const HttpRequest& request,
                         const std::string& token, bool sends_json, HttpResponse* response)
    : curl_(curl), url_(config.server + request.path) {
  curl_easy_setopt(curl, CURLOPT_URL, url_.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout.count()));
  curl_easy_setopt(curl, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, CollectHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &response->headers);

  if (config.insecure_skip_tls_verify) {
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  // The blobs point into `config`, which outlives the transfer (the
  // transport owns it); CURL_BLOB_NOCOPY spares a copy per request.
  if (!config.ca_pem.empty()) {
    ca_ = {const_cast<char*>(config.ca_pem.data()), config.ca_pem.size(), CURL_BLOB_NOCOPY};
    curl_easy_setopt(curl, CURLOPT_CAINFO_BLOB, &ca_);
  } else if (!config.ca_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_CAINFO, config.ca_file.c_str());
  }
  if (!config.client_cert_pem.empty()) {
    cert_ = {const_cast<char*>(config.client_cert_pem.data()), config.client_cert_pem.size(), CURL_BLOB_NOCOPY};
    curl_easy_setopt(curl, CURLOPT_SSLCERT_BLOB, &cert_);
  } else if (!config.client_cert_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLCERT, config.client_cert_file.c_str());
  }
  if (!config.client_key_pem.empty()) {
    key_ = {const_cast<char*>(config.client_key_pem.data()), config.client_key_pem.size(), CURL_BLOB_NOCOPY};
    curl_easy_setopt(curl, CURLOPT_SSLKEY_BLOB, &key_);
  } else if (!config.client_key_file.empty()) {
    curl_easy_setopt(curl, CURLOPT_SSLKEY, config.client_key_file.c_str());
  }

  headers_ = curl_slist_append(headers_, "Accept: application/json");
  if (sends_json) headers_ = curl_slist_append(headers_, "Content-Type: application/json");
  headers_ = curl_slist_append(headers_, "User-Agent: nvdra");
  if (!token.empty()) {
    auth_ = "Authorization: Bearer " + token;
    headers_ = curl_slist_append(headers_, auth_.c_str());
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers_);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf_);
}

CommonSetup::~CommonSetup() {
  curl_easy_setopt(curl_, CURLOPT_ERRORBUFFER, nullptr);
  curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, nullptr);
  curl_slist_free_all(headers_);
}

std::string CommonSetup::Detail(CURLcode rc) const { return errbuf_[0] ? errbuf_ : curl_easy_strerror(rc); }

std::optional<Status> TlsFailure(CURLcode rc, const std::string& what, const std::string& detail) {
  switch (rc) {
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
      return FailedPrecondition(what + ": TLS verification of the API server failed (" + detail +
                                "); check the certificate-authority in the kubeconfig or the "
                                "service-account ca.crt");
    case CURLE_SSL_CERTPROBLEM:
      return FailedPrecondition(what + ": the client certificate or key cannot be used (" + detail + ")");
    default:
      return std::nullopt;
  }
}

}  // namespace nvdra::kube::curl_internal
