// The HTTPS server of nvdra-webhook: HTTP/1.1 over TLS with Boost.Beast and
// OpenSSL, handing each request to a handler (webhook_routes.h). Anyone who
// reaches the port is a client, so everything a client controls is bounded:
//  - time: the TLS handshake and a request's head must arrive within
//    head_timeout, its body within body_timeout of the head, and a kept-alive
//    connection's next request must start within idle_timeout;
//  - size: the head (16 KiB, else 431) and the body (max_body_bytes, else
//    413, refused from the Content-Length before it is read);
//  - memory: the bodies being read at once, together (max_buffered_bytes; a
//    request that would pass it is answered 503), and what a finished
//    request held is given back to the system after a burst;
//  - connections: at max_connections a new one closes the connection that
//    has been waiting longest for a complete request, so idle clients cannot
//    keep the API server out; only when every connection has a request in
//    work is a new one closed;
//  - work: handlers run on a fixed pool of workers, never on the threads that
//    accept and read, so a slow request delays no other.
// The certificate and key are read again when their files change
// (cert-manager renews the Secret in place), on a thread of their own: a
// renewed certificate is served without a restart, and a path that blocks
// or holds no regular file stalls nothing but that thread, while the last
// good certificate goes on being served.
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
  std::string host;       // empty: all interfaces (IPv6 and IPv4); "127.0.0.1" in tests
  int port = 443;         // 0: the kernel picks a free port (see WebhookServer::port)
  std::string cert_file;  // PEM: the certificate, then any intermediate CAs
  std::string key_file;   // PEM: its private key
  // The API server refuses request bodies over 3 MiB, so no AdmissionReview
  // it sends is larger.
  size_t max_body_bytes = 3u << 20;
  // The request bodies of all connections being read at once, together.
  size_t max_buffered_bytes = 32u << 20;
  std::chrono::milliseconds head_timeout{10'000};
  std::chrono::milliseconds body_timeout{30'000};
  std::chrono::milliseconds idle_timeout{90'000};
  size_t max_connections = 256;
  int io_threads = 2;  // TLS and HTTP reads and writes
  int workers = 4;     // handlers
  // How often the certificate files are looked at without a new connection
  // asking (each new connection does).
  std::chrono::milliseconds cert_check_interval{10'000};
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
  // Stops accepting, drops every connection and request not yet in work,
  // and joins the threads once the handlers in work return (a certificate
  // read that blocks is left behind). Idempotent.
  void Stop();

  // The server's state; public only so the connections of the .cc can name it.
  struct Impl;

 private:
  WebhookServer() = default;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace nvdra::admission
