// BeastTransport: HTTP/1.1 with Boost.Beast on Asio sockets, TLS through
// OpenSSL. Every Beast and Asio include of the project is in this one file
// (they are slow to compile).
//
// Each connection owns an io_context and is used by one thread at a time, so
// the synchronous calls here run asynchronous operations on it until they
// complete: the stream's expiry bounds every operation by the request's
// deadline, and a watch's cancel flag stops the run at once. No thread
// is started (names are resolved by a blocking lookup, which an IP address,
// the in-cluster case, answers without a query).
#include "kube/beast_transport.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "kube/kube_client.h"
#include "util/mutex.h"

namespace nvdra::kube {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;
using boost::system::error_code;

constexpr std::chrono::milliseconds kConnectTimeout{5000};
// Idle connections kept for reuse; more concurrent requests than this open
// connections that are closed after their response. Enough for the claims
// a node with a raised --claim-workers prepares at once, so a node starting
// pods in waves reuses its connections instead of opening a burst of new
// ones.
constexpr size_t kMaxIdle = 32;
// Go's net/http (the API server) closes a connection idle for longer than
// its idle timeout; reusing one nearly that old races the server's close.
constexpr std::chrono::seconds kMaxIdleAge{50};
// A watch's cancel wakes it at once (CancelFlag); it also checks the flag
// this often, as a backstop.
constexpr std::chrono::milliseconds kCancelPoll{2000};
// An error answer to a watch is kept whole up to this size.
constexpr size_t kMaxErrorBody = 1u << 20;
constexpr uint32_t kHeaderLimit = 64 * 1024;
// A watch's body has no bound (it is handed on, not kept). (Not
// boost::none: Boost 1.74's parser then refuses every body with a
// Content-Length.)
constexpr uint64_t kNoBodyLimit = std::numeric_limits<uint64_t>::max();

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The parts of the kubeconfig's server URL a connection needs.
struct ServerUrl {
  bool tls = false;
  std::string host;  // without IPv6 brackets: resolver, SNI, certificate check
  std::string port;
  std::string authority;    // as the URL spells it, for the Host header
  std::string base_path;    // a path prefix of the server URL, without a trailing '/'
  bool host_is_ip = false;  // verified against the certificate's IP SANs, and no SNI
};

Result<ServerUrl> ParseServerUrl(const std::string& server) {
  auto bad = [&](const std::string& why) {
    return FailedPrecondition("the API server address \"" + server + "\" cannot be used: " + why +
                              "; check the server of the kubeconfig's cluster");
  };
  ServerUrl u;
  std::string lower = Lower(server);
  size_t pos;
  if (lower.rfind("https://", 0) == 0) {
    u.tls = true;
    pos = 8;
  } else if (lower.rfind("http://", 0) == 0) {
    pos = 7;
  } else {
    return bad("it is not an https:// or http:// URL");
  }
  size_t end = server.find_first_of("/?#", pos);
  u.authority = server.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
  if (end != std::string::npos) {
    if (server[end] != '/' || server.find_first_of("?#", end) != std::string::npos) {
      return bad("a query or fragment is not allowed");
    }
    u.base_path = server.substr(end);
    while (!u.base_path.empty() && u.base_path.back() == '/') u.base_path.pop_back();
  }
  if (u.authority.find('@') != std::string::npos) return bad("user information belongs in the kubeconfig's user");
  std::string port;
  if (!u.authority.empty() && u.authority[0] == '[') {
    size_t close = u.authority.find(']');
    if (close == std::string::npos) return bad("the IPv6 address has no closing ']'");
    u.host = u.authority.substr(1, close - 1);
    std::string rest = u.authority.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return bad("unexpected text after the IPv6 address");
      port = rest.substr(1);
    }
  } else {
    size_t colon = u.authority.rfind(':');
    u.host = u.authority.substr(0, colon);
    if (colon != std::string::npos) port = u.authority.substr(colon + 1);
    if (u.host.find(':') != std::string::npos) return bad("an IPv6 address must be in brackets");
  }
  if (u.host.empty()) return bad("it names no host");
  if (port.empty()) {
    port = u.tls ? "443" : "80";
  } else if (port.size() > 5 ||
             !std::all_of(port.begin(), port.end(), [](unsigned char c) { return std::isdigit(c); }) ||
             std::stoi(port) < 1 || std::stoi(port) > 65535) {
    return bad("the port is not a number from 1 to 65535");
  }
  u.port = port;
  error_code ec;
  (void)asio::ip::make_address(u.host, ec);
  u.host_is_ip = !ec;
  return u;
}

// OpenSSL's queued errors of this thread, oldest first, and clears them.
std::string OpenSslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    out += (out.empty() ? "" : "; ") + std::string(buf);
  }
  return out.empty() ? "no detail from OpenSSL" : out;
}

// The words users and docs know these failures by.
Status CaFailure(const std::string& detail) {
  return FailedPrecondition("TLS verification of the API server failed (" + detail +
                            "); check the certificate-authority in the kubeconfig or the service-account ca.crt");
}
Status ClientCertFailure(const std::string& detail) {
  return FailedPrecondition("the client certificate or key cannot be used (" + detail + ")");
}

// A file's identity for change detection: a rotated certificate is re-read.
struct FileStamp {
  int64_t mtime_ns = -1;
  int64_t size = -1;
  int64_t inode = -1;
  bool operator==(const FileStamp&) const = default;
};
FileStamp Stamp(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return {};
  return {static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
          static_cast<int64_t>(st.st_size), static_cast<int64_t>(st.st_ino)};
}

// A key with a passphrase cannot be used unattended; without this, OpenSSL
// would ask for one on the terminal.
int NoPassphrase(char*, int, int, void*) { return 0; }

Result<std::shared_ptr<asio::ssl::context>> BuildTlsContext(const KubeConfig& c, const ServerUrl& url) {
  ERR_clear_error();
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  SSL_CTX* native = ctx->native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  // Idle pooled connections then hold no read and write buffers.
  SSL_CTX_set_mode(native, SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_default_passwd_cb(native, NoPassphrase);

  if (c.insecure_skip_tls_verify) {
    SSL_CTX_set_verify(native, SSL_VERIFY_NONE, nullptr);
  } else {
    SSL_CTX_set_verify(native, SSL_VERIFY_PEER, nullptr);
    if (!c.ca_pem.empty()) {
      BIO* bio = BIO_new_mem_buf(c.ca_pem.data(), static_cast<int>(c.ca_pem.size()));
      X509_STORE* store = SSL_CTX_get_cert_store(native);
      int added = 0;
      while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
        added += X509_STORE_add_cert(store, cert) == 1;
        X509_free(cert);
      }
      BIO_free(bio);
      // Reading stops with "no start line" after the last certificate;
      // anything else is a damaged one.
      unsigned long last = ERR_peek_last_error();
      bool clean_end = last == 0 || (ERR_GET_LIB(last) == ERR_LIB_PEM && ERR_GET_REASON(last) == PEM_R_NO_START_LINE);
      if (added == 0 || !clean_end) {
        return CaFailure("the certificate-authority data holds no usable PEM certificate: " + OpenSslErrors());
      }
      ERR_clear_error();
    } else if (!c.ca_file.empty()) {
      if (SSL_CTX_load_verify_locations(native, c.ca_file.c_str(), nullptr) != 1) {
        return CaFailure("cannot load the CA file " + c.ca_file + ": " + OpenSslErrors());
      }
    } else if (SSL_CTX_set_default_verify_paths(native) != 1) {
      return CaFailure("cannot load the system's CA certificates: " + OpenSslErrors());
    }
    // The certificate must name the host the URL names (a DNS SAN) or carry
    // its address (an IP SAN), as for any HTTPS client.
    X509_VERIFY_PARAM* param = SSL_CTX_get0_param(native);
    int set = url.host_is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, url.host.c_str())
                             : (X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS),
                                X509_VERIFY_PARAM_set1_host(param, url.host.c_str(), url.host.size()));
    if (set != 1) return CaFailure("cannot check the certificate against host " + url.host + ": " + OpenSslErrors());
  }

  bool has_cert = !c.client_cert_pem.empty() || !c.client_cert_file.empty();
  bool has_key = !c.client_key_pem.empty() || !c.client_key_file.empty();
  if (has_key && !has_cert) return ClientCertFailure("a client key is configured without a client certificate");
  if (has_cert) {
    error_code ec;
    if (!c.client_cert_pem.empty()) {
      ctx->use_certificate_chain(asio::buffer(c.client_cert_pem), ec);
    } else {
      ctx->use_certificate_chain_file(c.client_cert_file, ec);
    }
    if (ec) {
      return ClientCertFailure("client certificate " +
                               (c.client_cert_pem.empty() ? c.client_cert_file : std::string("data")) + ": " +
                               ec.message());
    }
    // Without a key of its own, the key is looked for next to the
    // certificate (one PEM file holding both, as the kubelet writes).
    const std::string& key_pem = has_key ? c.client_key_pem : c.client_cert_pem;
    const std::string& key_file = has_key ? c.client_key_file : c.client_cert_file;
    if (!key_pem.empty()) {
      ctx->use_private_key(asio::buffer(key_pem), asio::ssl::context::pem, ec);
    } else {
      ctx->use_private_key_file(key_file, asio::ssl::context::pem, ec);
    }
    if (ec)
      return ClientCertFailure("client key " + (key_pem.empty() ? key_file : std::string("data")) + ": " +
                               ec.message());
    if (SSL_CTX_check_private_key(native) != 1) {
      return ClientCertFailure("the client key does not belong to the certificate: " + OpenSslErrors());
    }
  }
  return ctx;
}

// One connection to the API server, used by one thread at a time.
class Connection {
 public:
  explicit Connection(std::shared_ptr<asio::ssl::context> tls) : tls_context_(std::move(tls)) {
    if (tls_context_) {
      tls_.emplace(io_, *tls_context_);
    } else {
      plain_.emplace(io_);
    }
  }

  beast::tcp_stream& Tcp() { return tls_ ? beast::get_lowest_layer(*tls_) : *plain_; }
  SSL* Ssl() { return tls_ ? tls_->native_handle() : nullptr; }
  beast::ssl_stream<beast::tcp_stream>& Tls() { return *tls_; }
  beast::flat_buffer& buffer() { return buffer_; }
  bool cancelled() const { return cancelled_; }

  // Calls f with the stream requests and responses travel on.
  template <class F>
  void WithStream(F&& f) {
    if (tls_) {
      f(*tls_);
    } else {
      f(*plain_);
    }
  }

  // Starts an asynchronous operation with `start(handler)` and runs this
  // connection's io_context until the handler has run; returns its error.
  // The stream's expiry (Tcp().expires_at) ends the operation in time. With
  // `cancel`, a cancel stops the io_context's run; the socket is then
  // closed, the operation ends, and cancelled() is true.
  template <class Start>
  error_code Run(Start&& start, const CancelFlag* cancel = nullptr) {
    error_code result;
    bool done = false;
    start([&result, &done](error_code ec, auto&&...) {
      result = ec;
      done = true;
    });
    io_.restart();
    if (cancel == nullptr) {
      io_.run();
      return result;
    }
    // A cancel stops the loop at once (stop() is safe from any thread); the
    // poll is a backstop only.
    CancelFlag::Registration wake = cancel->OnCancel([this] { io_.stop(); });
    while (!done) {
      io_.run_for(kCancelPoll);
      if (!done && !cancelled_ && cancel->cancelled()) {
        cancelled_ = true;
        Tcp().close();
      }
      if (!done && io_.stopped()) io_.restart();
    }
    return result;
  }

  // Run with an operation on the stream: `op(stream, handler)`.
  template <class Op>
  error_code RunOnStream(Op&& op, const CancelFlag* cancel = nullptr) {
    return Run([&](auto handler) { WithStream([&](auto& stream) { op(stream, std::move(handler)); }); }, cancel);
  }

  // Whether an idle kept-alive connection can carry a request: the server
  // has neither closed it nor sent anything unasked (a TLS close_notify).
  bool LooksAlive() {
    if (buffer_.size() != 0) return false;
    if (SSL* ssl = Ssl(); ssl != nullptr && SSL_pending(ssl) > 0) return false;
    char byte;
    ssize_t n = ::recv(Tcp().socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }

  SteadyClock::time_point idle_since;

 private:
  // Declared first: the streams hold references into it.
  asio::io_context io_{1};
  std::shared_ptr<asio::ssl::context> tls_context_;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls_;
  std::optional<beast::tcp_stream> plain_;
  beast::flat_buffer buffer_;
  bool cancelled_ = false;
};

http::request<http::string_body> BuildRequest(const ServerUrl& url, const HttpRequest& r, const std::string& token,
                                              bool sends_json) {
  http::request<http::string_body> m;
  m.version(11);
  http::verb verb = http::string_to_verb(r.method);
  if (verb == http::verb::unknown) {
    m.method_string(r.method);
  } else {
    m.method(verb);
  }
  m.target(url.base_path + r.path);
  m.set(http::field::host, url.authority);
  m.set(http::field::user_agent, "nvdra");
  m.set(http::field::accept, "application/json");
  // The one kind of patch this client sends is a JSON merge patch.
  if (sends_json) {
    m.set(http::field::content_type, verb == http::verb::patch ? "application/merge-patch+json" : "application/json");
  }
  if (!token.empty()) m.set(http::field::authorization, "Bearer " + token);
  if (!r.body.empty() || verb == http::verb::post || verb == http::verb::put) {
    m.body() = r.body;
    m.prepare_payload();
  }
  return m;
}

// The request of RoundTrip as it goes on the wire, in one piece: the bytes
// Beast's serializer writes for BuildRequest's message (the same fields in
// the same order), without building its field list and walking its buffer
// sequences on every request.
std::string WireRequest(const ServerUrl& url, const HttpRequest& r, const std::string& token) {
  const http::verb verb = http::string_to_verb(r.method);
  const bool sized = !r.body.empty() || verb == http::verb::post || verb == http::verb::put;
  std::string out;
  out.reserve(192 + r.method.size() + url.base_path.size() + r.path.size() + url.authority.size() + token.size() +
              r.body.size());
  out.append(r.method).append(" ").append(url.base_path).append(r.path).append(" HTTP/1.1\r\n");
  out.append("Host: ").append(url.authority).append("\r\n");
  out.append("User-Agent: nvdra\r\nAccept: application/json\r\n");
  out.append(verb == http::verb::patch ? "Content-Type: application/merge-patch+json\r\n"
                                       : "Content-Type: application/json\r\n");
  if (!token.empty()) out.append("Authorization: Bearer ").append(token).append("\r\n");
  if (sized) out.append("Content-Length: ").append(std::to_string(r.body.size())).append("\r\n");
  out.append("\r\n");
  if (sized) out.append(r.body);
  return out;
}

template <class Fields>
void CopyHeaders(const Fields& fields, HttpResponse* out) {
  for (const auto& f : fields) {
    auto name = f.name_string();
    std::string key(name.size(), '\0');
    std::transform(name.begin(), name.end(), key.begin(),
                   [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; });
    out->headers.insert_or_assign(std::move(key), std::string(f.value()));
  }
}

// Reads an answer's header, then its body, in one run of the connection's
// loop: the body's read starts from the header's completion. The header
// first: Boost 1.74's string body reserves the announced Content-Length
// before the body limit is looked at, so an answer announcing more than
// `limit` is refused here.
error_code ReadResponse(Connection& c, http::response_parser<http::string_body>& parser, uint64_t limit) {
  return c.RunOnStream([&](auto& stream, auto handler) {
    http::async_read_header(stream, c.buffer(), parser,
                            [&stream, &c, &parser, limit, handler = std::move(handler)](error_code e, size_t) mutable {
                              if (!e && parser.content_length().value_or(0) > limit) e = http::error::body_limit;
                              if (e) {
                                handler(e, size_t{0});
                                return;
                              }
                              http::async_read(stream, c.buffer(), parser, std::move(handler));
                            });
  });
}

// The peer ended the connection before any byte of a response.
bool ClosedByPeer(const error_code& ec) {
  return ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe || ec == asio::ssl::error::stream_truncated;
}

// Requests that may be sent twice: the server may have acted on the first
// copy before its connection died (RFC 9110 9.2.2; Go's net/http replays the
// same ones).
bool Replayable(const std::string& method) { return method == "GET" || method == "HEAD"; }

std::string Millis(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

}  // namespace

class BeastTransport::Impl {
 public:
  explicit Impl(KubeConfig config)
      : config_(std::move(config)), token_(config_), url_(ParseServerUrl(config_.server)) {}

  ~Impl() {
    MutexLock l(mu_);
    idle_.clear();
  }

  Result<HttpResponse> RoundTrip(const HttpRequest& req);
  Result<HttpResponse> Stream(const HttpRequest& req, const StreamSink& sink, const CancelFlag* cancel);

  BeastTransportStats stats() const { return {connections_.load(), reuses_.load(), retries_.load()}; }

 private:
  Result<std::shared_ptr<asio::ssl::context>> TlsContext() EXCLUDES(mu_);
  Result<std::unique_ptr<Connection>> Connect(const std::string& what, SteadyClock::time_point deadline,
                                              std::chrono::milliseconds timeout, const CancelFlag* cancel);
  std::unique_ptr<Connection> TakeIdle() EXCLUDES(mu_);
  void PutIdle(std::unique_ptr<Connection> c) EXCLUDES(mu_);

  const KubeConfig config_;
  BearerToken token_;
  const Result<ServerUrl> url_;

  Mutex mu_;
  // Most recently used last.
  std::vector<std::unique_ptr<Connection>> idle_ GUARDED_BY(mu_);
  // Built on the first https request (not before: a plain-http server must
  // not cost the process OpenSSL's initialisation), again when a CA or client
  // certificate file changes.
  std::shared_ptr<asio::ssl::context> tls_ GUARDED_BY(mu_);
  std::array<FileStamp, 3> tls_files_ GUARDED_BY(mu_);

  std::atomic<uint64_t> connections_{0};
  std::atomic<uint64_t> reuses_{0};
  std::atomic<uint64_t> retries_{0};
};

Result<std::shared_ptr<asio::ssl::context>> BeastTransport::Impl::TlsContext() {
  std::array<FileStamp, 3> files = {Stamp(config_.ca_file), Stamp(config_.client_cert_file),
                                    Stamp(config_.client_key_file)};
  MutexLock l(mu_);
  if (tls_ != nullptr && files == tls_files_) return tls_;
  NVDRA_ASSIGN_OR_RETURN(auto ctx, BuildTlsContext(config_, *url_));
  tls_ = ctx;
  tls_files_ = files;
  return ctx;
}

Result<std::unique_ptr<Connection>> BeastTransport::Impl::Connect(const std::string& what,
                                                                  SteadyClock::time_point deadline,
                                                                  std::chrono::milliseconds timeout,
                                                                  const CancelFlag* cancel) {
  const ServerUrl& url = *url_;
  std::shared_ptr<asio::ssl::context> tls;
  if (url.tls) {
    auto ctx = TlsContext();
    if (!ctx.ok()) return ctx.status().Wrap(what);
    tls = std::move(ctx).value();
  }
  auto c = std::make_unique<Connection>(std::move(tls));
  error_code ec;
  tcp::resolver resolver(c->Tcp().get_executor());
  auto endpoints = resolver.resolve(url.host, url.port, ec);
  if (ec) return Unavailable(what + ": cannot resolve " + url.host + ": " + ec.message());

  c->Tcp().expires_at(std::min(deadline, SteadyClock::now() + kConnectTimeout));
  ec = c->Run([&](auto handler) { c->Tcp().async_connect(endpoints, std::move(handler)); }, cancel);
  if (c->cancelled()) return Unavailable(what + ": cancelled");
  if (ec == beast::error::timeout) {
    return DeadlineExceeded(what + ": connecting to " + url.authority + " timed out after " +
                            Millis(std::min(timeout, kConnectTimeout)));
  }
  if (ec) return Unavailable(what + ": cannot connect to " + url.authority + ": " + ec.message());

  tcp::socket& s = c->Tcp().socket();
  s.set_option(tcp::no_delay(true), ec);
  s.set_option(asio::socket_base::keep_alive(true), ec);
  // A peer that vanishes without a FIN (a watch holds its connection for
  // minutes) is found by keepalive probes.
  int idle = 30, interval = 10;
  ::setsockopt(s.native_handle(), IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  ::setsockopt(s.native_handle(), IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));

  if (SSL* ssl = c->Ssl()) {
    if (!url.host_is_ip) SSL_set_tlsext_host_name(ssl, url.host.c_str());
    c->Tcp().expires_at(deadline);
    ERR_clear_error();
    ec = c->Run([&](auto handler) { c->Tls().async_handshake(asio::ssl::stream_base::client, std::move(handler)); },
                cancel);
    if (c->cancelled()) return Unavailable(what + ": cancelled");
    if (ec) {
      long verify = SSL_get_verify_result(ssl);
      if (!config_.insecure_skip_tls_verify && verify != X509_V_OK) {
        return CaFailure(X509_verify_cert_error_string(verify)).Wrap(what);
      }
      if (ec == beast::error::timeout)
        return DeadlineExceeded(what + ": TLS handshake timed out after " + Millis(timeout));
      return Unavailable(what + ": TLS handshake with " + url.authority + " failed: " + ec.message());
    }
  }
  ++connections_;
  return c;
}

std::unique_ptr<Connection> BeastTransport::Impl::TakeIdle() {
  const auto now = SteadyClock::now();
  for (;;) {
    std::unique_ptr<Connection> c;
    {
      MutexLock l(mu_);
      if (idle_.empty()) return nullptr;
      c = std::move(idle_.back());
      idle_.pop_back();
    }
    if (now - c->idle_since < kMaxIdleAge && c->LooksAlive()) return c;
    // Closed here, outside the lock.
  }
}

void BeastTransport::Impl::PutIdle(std::unique_ptr<Connection> c) {
  c->Tcp().expires_never();
  c->idle_since = SteadyClock::now();
  std::unique_ptr<Connection> evicted;  // closed after the lock is released
  MutexLock l(mu_);
  if (idle_.size() >= kMaxIdle) {
    evicted = std::move(idle_.front());
    idle_.erase(idle_.begin());
  }
  idle_.push_back(std::move(c));
}

Result<HttpResponse> BeastTransport::Impl::RoundTrip(const HttpRequest& req) {
  if (!url_.ok()) return url_.status();
  NVDRA_ASSIGN_OR_RETURN(std::string token, token_.Get());
  // Made only for a message: most requests need none.
  auto what = [&] { return req.method + " " + config_.server + req.path; };
  const auto deadline = SteadyClock::now() + req.timeout;
  auto timed_out = [&](const char* stage) {
    return DeadlineExceeded(what() + ": timed out after " + Millis(req.timeout) + " (" + stage + ")");
  };
  const std::string wire = WireRequest(*url_, req, token);

  for (int attempt = 1;; ++attempt) {
    std::unique_ptr<Connection> c = attempt == 1 ? TakeIdle() : nullptr;
    const bool reused = c != nullptr;
    if (reused) {
      ++reuses_;
    } else {
      NVDRA_ASSIGN_OR_RETURN(c, Connect(what(), deadline, req.timeout, nullptr));
    }
    c->Tcp().expires_at(deadline);
    error_code ec = c->RunOnStream([&](auto& stream, auto handler) {
      asio::async_write(stream, asio::buffer(wire), std::move(handler));
    });
    if (ec) {
      if (ec == beast::error::timeout) return timed_out("sending the request");
      // The request did not get through: the server had closed this
      // kept-alive connection, and cannot have acted on it.
      if (reused) {
        ++retries_;
        continue;
      }
      return Unavailable(what() + ": sending the request failed: " + ec.message());
    }

    const uint64_t limit = req.max_body_bytes == 0 ? kMaxResponseBytes
                                                   : std::min<uint64_t>(req.max_body_bytes, kMaxResponseBytes);
    http::response_parser<http::string_body> parser;
    parser.body_limit(limit);
    parser.header_limit(kHeaderLimit);
    ec = ReadResponse(*c, parser, limit);
    if (ec) {
      if (ec == beast::error::timeout) return timed_out("waiting for the response");
      // A kept-alive connection the server closed just as the request went
      // out: no answer at all. Only a request that is safe to send twice
      // is sent again; others may have reached the server.
      if (reused && !parser.got_some() && ClosedByPeer(ec) && Replayable(req.method)) {
        ++retries_;
        continue;
      }
      if (ec == http::error::body_limit) {
        return Unavailable(what() + ": the answer is larger than " +
                           (limit >= (1u << 20) ? std::to_string(limit >> 20) + " MiB"
                                                : std::to_string(limit) + " bytes") +
                           ", the most this request reads; refused");
      }
      if (!parser.got_some() && ClosedByPeer(ec)) {
        return Unavailable(what() + ": the server closed the connection without a response (" + ec.message() + ")");
      }
      return Unavailable(what() + ": reading the response failed: " + ec.message());
    }
    auto& m = parser.get();
    HttpResponse resp;
    resp.status = m.result_int();
    CopyHeaders(m, &resp);
    bool keep = m.keep_alive();
    resp.body = std::move(m.body());
    if (keep) PutIdle(std::move(c));
    return resp;
  }
}

Result<HttpResponse> BeastTransport::Impl::Stream(const HttpRequest& req, const StreamSink& sink,
                                                  const CancelFlag* cancel) {
  if (!url_.ok()) return url_.status();
  NVDRA_ASSIGN_OR_RETURN(std::string token, token_.Get());
  const std::string what = "GET " + config_.server + req.path;
  const auto deadline = SteadyClock::now() + req.timeout;
  auto cancelled = [&] { return Unavailable(what + ": cancelled"); };
  auto failed = [&](const char* stage, const error_code& ec) {
    if (ec == beast::error::timeout) return DeadlineExceeded(what + ": stream timed out after " + Millis(req.timeout));
    return Unavailable(what + ": " + stage + ": " + ec.message());
  };

  NVDRA_ASSIGN_OR_RETURN(std::unique_ptr<Connection> c, Connect(what, deadline, req.timeout, cancel));
  HttpRequest get = req;
  get.method = "GET";
  get.body.clear();
  auto message = BuildRequest(*url_, get, token, /*sends_json=*/false);
  c->Tcp().expires_at(deadline);
  error_code ec = c->RunOnStream([&](auto& stream,
                                     auto handler) { http::async_write(stream, message, std::move(handler)); },
                                 cancel);
  if (c->cancelled()) return cancelled();
  if (ec) return failed("sending the request failed", ec);

  http::response_parser<http::buffer_body> parser;
  parser.body_limit(kNoBodyLimit);
  parser.header_limit(kHeaderLimit);
  ec = c->RunOnStream([&](auto& stream,
                          auto handler) { http::async_read_header(stream, c->buffer(), parser, std::move(handler)); },
                      cancel);
  if (c->cancelled()) return cancelled();
  if (ec) return failed("reading the response failed", ec);

  HttpResponse resp;
  resp.status = parser.get().result_int();
  CopyHeaders(parser.get(), &resp);
  const bool success = resp.status / 100 == 2;
  std::array<char, 16 * 1024> piece;
  while (!parser.is_done()) {
    if (cancel != nullptr && cancel->cancelled()) return cancelled();
    parser.get().body().data = piece.data();
    parser.get().body().size = piece.size();
    ec = c->RunOnStream([&](auto& stream,
                            auto handler) { http::async_read_some(stream, c->buffer(), parser, std::move(handler)); },
                        cancel);
    if (c->cancelled()) return cancelled();
    if (ec == http::error::need_buffer) ec = {};  // the piece is full
    if (ec) return failed("stream broke", ec);
    size_t n = piece.size() - parser.get().body().size;
    if (n == 0) continue;
    if (!success) {
      // An error answer is small; keep it whole for the caller's Status.
      if (resp.body.size() < kMaxErrorBody) resp.body.append(piece.data(), n);
      continue;
    }
    if (!sink(std::string_view(piece.data(), n))) break;
  }
  return resp;
}

BeastTransport::BeastTransport(KubeConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}
BeastTransport::~BeastTransport() = default;

Result<HttpResponse> BeastTransport::RoundTrip(const HttpRequest& request) { return impl_->RoundTrip(request); }

Result<HttpResponse> BeastTransport::Stream(const HttpRequest& request, const StreamSink& sink,
                                            const CancelFlag* cancel) {
  return impl_->Stream(request, sink, cancel);
}

BeastTransportStats BeastTransport::stats() const { return impl_->stats(); }

// Defined here rather than in kube_client.cc, so that nvdra_kube_client (the
// fuzz targets' library) holds no reference to the transport.
std::unique_ptr<KubeClient> KubeClient::FromConfig(const KubeConfig& config, KubeClientOptions options) {
  return std::make_unique<KubeClient>(std::make_unique<BeastTransport>(config), std::move(options));
}

}  // namespace nvdra::kube
