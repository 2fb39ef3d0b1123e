#include "kube/curl_transport.h"

#include <curl/curl.h>

#include <algorithm>

#include "kube/curl_common.h"

namespace nvdra::kube {
namespace {

struct GlobalInit {
  GlobalInit() { curl_global_init(CURL_GLOBAL_DEFAULT); }
};

size_t WriteBody(char* ptr, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(ptr, size * n);
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
  CURLcode rc;
  std::string detail;
  {
    curl_internal::CommonSetup setup(curl, config_, req, token, /*sends_json=*/true, &resp);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(std::min<int64_t>(req.timeout.count(), 5000)));
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, WriteBody);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &resp.body);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, req.method.c_str());
    if (!req.body.empty() || req.method == "POST" || req.method == "PUT") {
      curl_easy_setopt(curl, CURLOPT_POSTFIELDS, req.body.c_str());
      curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(req.body.size()));
    }
    rc = curl_easy_perform(curl);
    detail = setup.Detail(rc);
  }
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  Release(curl);

  if (rc != CURLE_OK) {
    std::string what = req.method + " " + config_.server + req.path;
    if (auto tls = curl_internal::TlsFailure(rc, what, detail)) return *tls;
    if (rc == CURLE_OPERATION_TIMEDOUT) {
      return DeadlineExceeded(what + ": timed out after " + std::to_string(req.timeout.count()) + " ms (" + detail +
                              ")");
    }
    return Unavailable(what + ": " + detail);
  }
  resp.status = status;
  return resp;
}

}  // namespace nvdra::kube
