// Every Beast and Asio include of the webhook is in this file (they are slow
// to compile). Each connection runs on a strand of its own; its reads and
// writes are chained, one at a time, and the stream's expiry bounds each.
#include "admission/webhook_server.h"

#include <array>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <sys/stat.h>

#include <atomic>
#include <exception>
#include <optional>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "util/log.h"
#include "util/mutex.h"
#include "util/thread_name.h"

namespace nvdra::admission {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

constexpr uint32_t kHeaderLimit = 16 * 1024;
// A failed reload of a changed certificate is tried again after this long,
// not on every connection.
constexpr std::chrono::seconds kReloadRetry{10};

std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

// What identifies a version of the two files: a Secret volume swaps them by
// renaming a directory, which changes both times.
struct FileStamp {
  struct timespec mtime {};
  off_t size = -1;
  ino_t ino = 0;
  bool operator==(const FileStamp& o) const {
    return mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec && size == o.size && ino == o.ino;
  }
};

FileStamp StampOf(const std::string& path) {
  struct stat st {};
  FileStamp s;
  if (::stat(path.c_str(), &st) == 0) {
    s.mtime = st.st_mtim;
    s.size = st.st_size;
    s.ino = st.st_ino;
  }
  return s;
}

Result<std::shared_ptr<asio::ssl::context>> LoadTls(const std::string& cert_file, const std::string& key_file) {
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
  SSL_CTX* native = ctx->native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_mode(native, SSL_MODE_RELEASE_BUFFERS);
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(native, cert_file.c_str()) != 1) {
    return InvalidArgument("--tls-cert-file " + cert_file + ": cannot read a PEM certificate: " + OpenSslError());
  }
  BIO* bio = BIO_new_file(key_file.c_str(), "r");
  EVP_PKEY* key = bio != nullptr ? PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr) : nullptr;
  BIO_free(bio);
  if (key == nullptr) {
    return InvalidArgument("--tls-private-key-file " + key_file + ": cannot read a PEM private key: " +
                           OpenSslError());
  }
  const bool used = SSL_CTX_use_PrivateKey(native, key) == 1;
  EVP_PKEY_free(key);
  if (!used || SSL_CTX_check_private_key(native) != 1) {
    ERR_clear_error();
    return InvalidArgument("--tls-private-key-file " + key_file + " does not match the certificate in " + cert_file);
  }
  return ctx;
}

}  // namespace

struct WebhookServer::Impl {
  WebhookServerOptions options;
  HttpHandler handler;
  std::atomic<size_t> connections{0};

  Mutex tls_mu;
  std::shared_ptr<asio::ssl::context> tls GUARDED_BY(tls_mu);
  FileStamp cert_stamp GUARDED_BY(tls_mu);
  FileStamp key_stamp GUARDED_BY(tls_mu);
  std::chrono::steady_clock::time_point retry_after GUARDED_BY(tls_mu);

  asio::io_context ioc;
  std::optional<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;

  // The TLS context for a new connection: the loaded one, read again first
  // when the files changed since.
  std::shared_ptr<asio::ssl::context> Tls() EXCLUDES(tls_mu) {
    MutexLock lock(tls_mu);
    FileStamp cert = StampOf(options.cert_file);
    FileStamp key = StampOf(options.key_file);
    if ((cert == cert_stamp && key == key_stamp) || std::chrono::steady_clock::now() < retry_after) return tls;
    auto fresh = LoadTls(options.cert_file, options.key_file);
    if (fresh.ok()) {
      NVDRA_INFO("webhook: serving the certificate read again from {}", options.cert_file);
      tls = std::move(fresh).value();
      cert_stamp = cert;
      key_stamp = key;
    } else {
      NVDRA_ERROR("webhook: keeping the previous certificate: {}", fresh.status().message());
      retry_after = std::chrono::steady_clock::now() + kReloadRetry;
    }
    return tls;
  }

  void Accept();
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<asio::ssl::context> tls, WebhookServer::Impl& server)
      : tls_(std::move(tls)), stream_(std::move(socket), *tls_), server_(server) {}
  ~Session() { server_.connections.fetch_sub(1); }

  void Run() {
    beast::get_lowest_layer(stream_).expires_after(server_.options.request_timeout);
    stream_.async_handshake(asio::ssl::stream_base::server,
                            [self = shared_from_this()](error_code ec) { self->OnHandshake(ec); });
  }

 private:
  void OnHandshake(error_code ec) {
    if (ec) {
      NVDRA_VLOG(4, "webhook: TLS handshake failed: {}", ec.message());
      return;  // the socket closes with the session
    }
    Read();
  }

  void Read() {
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(server_.options.max_body_bytes);
    beast::get_lowest_layer(stream_).expires_after(server_.options.request_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(error_code ec) {
    if (ec == http::error::end_of_stream || ec == asio::ssl::error::stream_truncated) return Close();
    // A request refused before it was read whole leaves its rest unread:
    // the answer goes out, then the rest is drained (lingering close), so
    // the client reads the answer instead of a reset.
    if (ec == http::error::body_limit) {
      linger_ = true;
      return Answer(TextError(413, "request body larger than " + std::to_string(server_.options.max_body_bytes) +
                                       " bytes"),
                    /*keep_alive=*/false);
    }
    if (ec == http::error::header_limit) {
      linger_ = true;
      return Answer(TextError(431, "request head larger than " + std::to_string(kHeaderLimit) + " bytes"), false);
    }
    if (ec && ec.category() == http::make_error_code(http::error::bad_version).category()) {  // a malformed request
      linger_ = true;
      return Answer(TextError(400, "bad request: " + ec.message()), false);
    }
    if (ec) {
      NVDRA_VLOG(4, "webhook: connection dropped: {}", ec.message());
      return;
    }
    const auto& msg = parser_->get();
    HttpRequest req;
    req.method = std::string(msg.method_string());
    req.target = std::string(msg.target());
    if (auto it = msg.find(http::field::content_type); it != msg.end()) req.content_type = std::string(it->value());
    req.body = msg.body();
    const bool keep_alive = msg.keep_alive();
    HttpAnswer answer;
    try {
      answer = server_.handler(req);
    } catch (const std::exception& e) {
      NVDRA_ERROR("webhook: answering {} failed: {}", req.target, e.what());
      answer = TextError(500, std::string("internal error: ") + e.what());
    }
    Answer(std::move(answer), keep_alive);
  }

  void Answer(HttpAnswer answer, bool keep_alive) {
    res_ = {};
    res_.version(11);
    res_.result(static_cast<unsigned>(answer.status));
    res_.set(http::field::content_type, answer.content_type);
    if (answer.content_type.starts_with("text/plain")) res_.set("X-Content-Type-Options", "nosniff");
    res_.body() = std::move(answer.body);
    res_.keep_alive(keep_alive);
    res_.prepare_payload();
    keep_alive_ = keep_alive;
    beast::get_lowest_layer(stream_).expires_after(server_.options.request_timeout);
    http::async_write(stream_, res_, [self = shared_from_this()](error_code ec, size_t) {
      if (ec) return;
      if (self->keep_alive_) return self->Read();
      if (self->linger_) return self->LingerClose();
      self->Close();
    });
  }

  void Close() {
    beast::get_lowest_layer(stream_).expires_after(server_.options.request_timeout);
    stream_.async_shutdown([self = shared_from_this()](error_code) {});
  }

  // The answer is out: end our side, then read and discard what the client
  // still sends (at most kMaxDrainBytes, for at most kDrainTime) before the
  // socket closes, so closing with unread input does not reset the
  // connection under the answer.
  void LingerClose() {
    auto& tcp = beast::get_lowest_layer(stream_);
    error_code ignored;
    tcp.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
    tcp.expires_after(kDrainTime);
    Drain();
  }
  void Drain() {
    beast::get_lowest_layer(stream_).async_read_some(
        asio::buffer(drain_), [self = shared_from_this()](error_code ec, size_t n) {
          self->drained_ += n;
          if (ec || self->drained_ > kMaxDrainBytes) return;  // the socket closes with the session
          self->Drain();
        });
  }
  static constexpr size_t kMaxDrainBytes = 1u << 20;
  static constexpr std::chrono::seconds kDrainTime{2};

  std::shared_ptr<asio::ssl::context> tls_;
  beast::ssl_stream<beast::tcp_stream> stream_;
  WebhookServer::Impl& server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> res_;
  bool keep_alive_ = false;
  bool linger_ = false;
  std::array<char, 16384> drain_{};
  size_t drained_ = 0;
};

}  // namespace

void WebhookServer::Impl::Accept() {
  acceptor->async_accept(asio::make_strand(ioc), [this](error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (!ec) {
      if (connections.fetch_add(1) >= options.max_connections) {
        connections.fetch_sub(1);
        NVDRA_VLOG(2, "webhook: {} connections held; closing a new one", options.max_connections);
        error_code ignored;
        socket.close(ignored);
      } else {
        std::make_shared<Session>(std::move(socket), Tls(), *this)->Run();
      }
    } else {
      NVDRA_VLOG(1, "webhook: accept: {}", ec.message());
    }
    Accept();
  });
}

Result<std::unique_ptr<WebhookServer>> WebhookServer::Start(WebhookServerOptions options, HttpHandler handler) {
  if (options.port < 0 || options.port > 65535) {
    return InvalidArgument("--port " + std::to_string(options.port) + ": must be from 0 to 65535");
  }
  NVDRA_ASSIGN_OR_RETURN(auto tls, LoadTls(options.cert_file, options.key_file));
  std::unique_ptr<WebhookServer> server(new WebhookServer());
  server->impl_ = std::make_unique<Impl>();
  Impl& impl = *server->impl_;
  impl.options = std::move(options);
  if (impl.options.max_connections == 0) impl.options.max_connections = 1;
  if (impl.options.threads < 1) impl.options.threads = 1;
  impl.handler = std::move(handler);
  {
    MutexLock lock(impl.tls_mu);
    impl.tls = std::move(tls);
    impl.cert_stamp = StampOf(impl.options.cert_file);
    impl.key_stamp = StampOf(impl.options.key_file);
  }

  error_code ec;
  const auto port = static_cast<unsigned short>(impl.options.port);
  std::vector<tcp::endpoint> endpoints;
  if (impl.options.host.empty()) {
    endpoints = {tcp::endpoint(tcp::v6(), port), tcp::endpoint(tcp::v4(), port)};
  } else {
    auto addr = asio::ip::make_address(impl.options.host, ec);
    if (ec) return InvalidArgument("webhook address " + impl.options.host + ": " + ec.message());
    endpoints = {tcp::endpoint(addr, port)};
  }
  std::string last_error;
  for (const tcp::endpoint& ep : endpoints) {
    tcp::acceptor acceptor(impl.ioc);
    acceptor.open(ep.protocol(), ec);
    if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    // Dual-stack where the kernel allows; IPv4 alone on hosts without IPv6.
    if (!ec && ep.protocol() == tcp::v6()) acceptor.set_option(asio::ip::v6_only(false), ec);
    if (!ec) acceptor.bind(ep, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) {
      impl.acceptor.emplace(std::move(acceptor));
      break;
    }
    last_error = ec.message();
  }
  if (!impl.acceptor) {
    return Unavailable("webhook: cannot listen on port " + std::to_string(impl.options.port) + ": " + last_error);
  }
  server->port_ = impl.acceptor->local_endpoint().port();
  impl.Accept();
  for (int i = 0; i < impl.options.threads; ++i) {
    impl.threads.emplace_back([&impl] {
      SetThreadName("webhook-https");
      impl.ioc.run();
    });
  }
  NVDRA_INFO("webhook: serving HTTPS on {} port {}", impl.options.host.empty() ? "all interfaces" : impl.options.host,
             server->port_);
  return server;
}

WebhookServer::~WebhookServer() { Stop(); }

void WebhookServer::Stop() {
  if (!impl_) return;
  impl_->ioc.stop();
  for (auto& t : impl_->threads) t.join();
  impl_.reset();
}

}  // namespace nvdra::admission
