// HttpTransport over libcurl: HTTP/1.1 and TLS with the kubeconfig's CA,
// client certificate and bearer token, reusing connections (keep-alive).
#pragma once

#include <memory>
#include <vector>

#include "kube/http_transport.h"
#include "kube/kube_config.h"
#include "util/mutex.h"

namespace nvdra::kube {

class CurlTransport final : public HttpTransport {
 public:
  explicit CurlTransport(KubeConfig config);
  ~CurlTransport() override;
  CurlTransport(const CurlTransport&) = delete;
  CurlTransport& operator=(const CurlTransport&) = delete;

  Result<HttpResponse> RoundTrip(const HttpRequest& request) override;
  // On its own connection (a watch holds it for minutes); curl_stream.cc.
  Result<HttpResponse> Stream(const HttpRequest& request, const StreamSink& sink,
                              const std::atomic<bool>* cancel) override;

 private:
  void* Acquire() EXCLUDES(mu_);
  void Release(void* handle) EXCLUDES(mu_);

  KubeConfig config_;
  BearerToken token_;
  Mutex mu_;
  // Idle easy handles; each keeps its own connection alive between requests.
  std::vector<void*> idle_ GUARDED_BY(mu_);
};

}  // namespace nvdra::kube
