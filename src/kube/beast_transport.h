// HttpTransport over HTTP/1.1 (Boost.Beast on Asio sockets) with TLS from
// OpenSSL: the kubeconfig's CA, client certificate and bearer token, a small
// pool of kept-alive connections, and watch bodies streamed as they arrive.
// Beast and Asio stay inside beast_transport.cc: this header shows neither.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "kube/http_transport.h"
#include "kube/kube_config.h"

namespace nvdra::kube {

struct BeastTransportStats {
  uint64_t connections = 0;  // TCP connections opened (and TLS handshakes, for https)
  uint64_t reuses = 0;       // requests sent on a kept-alive connection
  uint64_t retries = 0;      // requests resent on a fresh connection after a kept-alive one had died
};

// The largest answer RoundTrip accepts: far beyond any object or LIST page
// a node agent reads (etcd keeps an object under 1.5 MiB), and small enough
// that an answer announcing more is refused before anything is allocated
// for it. Watches (Stream) hand their body on piece by piece and keep none.
inline constexpr uint64_t kMaxResponseBytes = 256ull * 1024 * 1024;

class BeastTransport final : public HttpTransport {
 public:
  // Nothing touches the network or OpenSSL here; an http:// server never
  // makes the process initialise OpenSSL at all.
  explicit BeastTransport(KubeConfig config);
  ~BeastTransport() override;
  BeastTransport(const BeastTransport&) = delete;
  BeastTransport& operator=(const BeastTransport&) = delete;

  // Thread-safe; concurrent calls use separate connections.
  Result<HttpResponse> RoundTrip(const HttpRequest& request) override;
  // On its own connection, closed at the end (a watch holds it for minutes).
  Result<HttpResponse> Stream(const HttpRequest& request, const StreamSink& sink, const CancelFlag* cancel) override;

  BeastTransportStats stats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nvdra::kube
