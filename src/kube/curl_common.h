// What the request/response path (curl_transport.cc) and the watch stream
// (curl_stream.cc) set up the same way on a curl easy handle: the URL, the
// total timeout, HTTP/1.1 with TCP keepalive, TLS from the kubeconfig, the
// JSON and bearer-token headers, the response headers and the error buffer;
// and the TLS failures both report the same way. Internal to kube/.
#pragma once

#include <curl/curl.h>

#include <optional>
#include <string>

#include "kube/http_transport.h"
#include "kube/kube_config.h"

namespace nvdra::kube::curl_internal {

// Owns what curl reads during the transfer (URL, certificate blobs, header
// list, error buffer): keep it alive until curl_easy_perform returns. Its
// end detaches the header list and the error buffer from the handle, which
// may live on (a pooled handle, or one still to be cleaned up).
class CommonSetup {
 public:
  // Response headers go to `response->headers`, lower-cased names.
  CommonSetup(CURL* curl, const KubeConfig& config, const HttpRequest& request, const std::string& token,
              bool sends_json, HttpResponse* response);
  ~CommonSetup();
  CommonSetup(const CommonSetup&) = delete;
  CommonSetup& operator=(const CommonSetup&) = delete;

  // curl's own words for the last failure, or its generic text for `rc`.
  std::string Detail(CURLcode rc) const;

 private:
  CURL* curl_;
  std::string url_;
  std::string auth_;
  curl_blob ca_{}, cert_{}, key_{};
  curl_slist* headers_ = nullptr;
  char errbuf_[CURL_ERROR_SIZE] = {0};
};

// The failures retrying cannot fix (TLS verification, an unusable client
// certificate), as kFailedPrecondition; nullopt for any other code.
std::optional<Status> TlsFailure(CURLcode rc, const std::string& what, const std::string& detail);

}  // namespace nvdra::kube::curl_internal
