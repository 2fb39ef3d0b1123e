// The HTTPS server of nvdra-webhook: HTTP/1.1 over TLS with Boost.Beast and
// OpenSSL, handing each request to a handler (webhook_routes.h). Bounded in
// everything a client controls: the request head (16 KiB) and body
// (max_body_bytes, refused with 413 from the Content-Length before it is
// read), the time from accept or the previous answer to the next request
// being read whole (request_timeout), and the connections held at once (a new
// one beyond max_connections is closed). The certificate and key are read
// again when their files change (cert-manager renews the Secret in place), so
// a renewed certificate is served without a restart.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "admission/admission_review.h"
#include "util/status.h"

namespace nvdra::admission {

struct HttpRequest {
  std::string method;
  std::string target;  // path and query as sent
  std::string content_type;
  std::string body;
};

using HttpHandler = std::function<HttpAnswer(const HttpRequest& request)>;

struct WebhookServerOptions {
  std::string host;  // empty: all interfaces (IPv6 and IPv4); "127.0.0.1" in tests
  int port = 443;    // 0: the kernel picks a free port (see WebhookServer::port)
  std::string cert_file;  // PEM: the certificate, then any intermediate CAs
  std::string key_file;   // PEM: its private key
  // The API server sends the object (and, on UPDATE, the old object), each
  // at most etcd's 1.5 MiB by default; this leaves room for larger limits.
  size_t max_body_bytes = 16u << 20;
  std::chrono::milliseconds request_timeout{30'000};
  size_t max_connections = 256;
  int threads = 2;
};

class WebhookServer {
 public:
  // Reads the certificate and key, binds and starts serving. A certificate
  // or key that cannot be read, a key that does not match, or a port that
  // cannot be bound is an error; nothing is left running then.
  static Result<std::unique_ptr<WebhookServer>> Start(WebhookServerOptions options, HttpHandler handler);
  ~WebhookServer();
  WebhookServer(const WebhookServer&) = delete;
  WebhookServer& operator=(const WebhookServer&) = delete;

  int port() const { return port_; }
  // Stops accepting, drops every connection and joins the threads. Idempotent.
  void Stop();

  // The server's state; public only so the connections of the .cc can name it.
  struct Impl;

 private:
  WebhookServer() = default;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace nvdra::admission
