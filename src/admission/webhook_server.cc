// Every Beast and Asio include of the webhook's HTTP side is in this file
// (they are slow to compile). Each connection runs on a strand of its own;
// its reads and writes are chained, one at a time, and the stream's expiry
// bounds each. A request read whole goes to the worker pool; its answer
// comes back to the connection's strand to be written.
#include "admission/webhook_server.h"

#include <malloc.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <deque>
#include <exception>
#include <list>
#include <optional>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "admission/certificate_reloader.h"
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
// Bytes are read through a buffer of at most this much; a body moves on
// from it into its string as it arrives.
constexpr size_t kReadBufferLimit = 64 * 1024 + kHeaderLimit;
// What a kept-alive connection reads at first of its next request: enough
// for most heads, small for many idle connections.
constexpr size_t kFirstRead = 1024;
// A connection keeps a read buffer this large between requests; a larger
// one is freed.
constexpr size_t kKeptBufferBytes = 16 * 1024;
// Once requests of at least this much are over and nothing is buffered,
// the heap's free memory goes back to the system: the allocator keeps it
// otherwise, and a burst would leave the process at its peak for good. A
// body of 256 KiB parses into up to 20 MiB of small allocations; the
// API server's reviews are a few KiB.
constexpr size_t kTrimAfterBytes = 256 * 1024;
// Likewise once the connections held fall to half of a peak of at least
// this many: each held TLS state and buffers, freed in between other
// allocations.
constexpr size_t kTrimAfterConnections = 64;

class Session;

// Runs the handlers, off the threads that accept, read and write.
class WorkerPool {
 public:
  void Start(int n) {
    for (int i = 0; i < n; ++i) threads_.emplace_back([this] { Run(); });
  }
  void Post(std::function<void()> task) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (stopping_) return;
    tasks_.push_back(std::move(task));
    cv_.NotifyOne();
  }
  // Drops the tasks not started and joins the workers once theirs return.
  void Stop() EXCLUDES(mu_) {
    std::deque<std::function<void()>> dropped;
    {
      MutexLock lock(mu_);
      stopping_ = true;
      dropped.swap(tasks_);
      cv_.NotifyAll();
    }
    dropped.clear();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void Run() EXCLUDES(mu_) {
    SetThreadName("webhook-work");
    MutexLock lock(mu_);
    for (;;) {
      cv_.Wait(mu_, [&]() REQUIRES(mu_) { return stopping_ || !tasks_.empty(); });
      if (stopping_) return;
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.Unlock();
      task();
      task = nullptr;  // what it holds goes before the next wait
      lock.Lock();
    }
  }

  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> tasks_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

// The bytes of the request bodies being read or judged, all connections
// together.
class BodyBudget {
 public:
  explicit BodyBudget(size_t limit) : limit_(limit) {}
  bool TryReserve(size_t n) {
    size_t used = used_.load();
    do {
      if (n > limit_ - used) return false;
    } while (!used_.compare_exchange_weak(used, used + n));
    if (n >= kTrimAfterBytes) large_.store(true);
    return true;
  }
  // True when this release leaves nothing buffered after a large request:
  // the moment to give memory back.
  bool Release(size_t n) {
    if (n == 0) return false;
    return used_.fetch_sub(n) == n && large_.exchange(false);
  }

 private:
  const size_t limit_;
  std::atomic<size_t> used_{0};
  std::atomic<bool> large_{false};
};

// The connections held, in the order they began to wait for a request, so
// that at the cap the one waiting longest is closed first.
class ConnectionTable {
 public:
  struct Entry {
    std::weak_ptr<Session> session;
    bool busy = false;  // a request read whole, in work or being answered
    bool evicted = false;
  };
  using Slot = std::list<Entry>::iterator;
  struct Admission {
    std::optional<Slot> slot;        // none: refused, every connection is busy
    std::weak_ptr<Session> evicted;  // to be closed to make room
  };

  explicit ConnectionTable(size_t cap) : cap_(cap) {}

  Admission Admit(const std::shared_ptr<Session>& session) EXCLUDES(mu_) {
    Admission out;
    MutexLock lock(mu_);
    if (entries_.size() - evicted_ >= cap_) {
      auto it = std::find_if(entries_.begin(), entries_.end(), [](const Entry& e) { return !e.busy && !e.evicted; });
      if (it == entries_.end()) return out;
      it->evicted = true;
      ++evicted_;
      out.evicted = it->session;
    }
    entries_.push_back(Entry{session});
    peak_ = std::max(peak_, entries_.size());
    out.slot = std::prev(entries_.end());
    return out;
  }
  void SetBusy(Slot slot, bool busy) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    slot->busy = busy;
    if (!busy) entries_.splice(entries_.end(), entries_, slot);
  }
  // True when this leaves half of a large peak: the moment to give memory
  // back.
  bool Remove(Slot slot) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (slot->evicted) --evicted_;
    entries_.erase(slot);
    if (peak_ < kTrimAfterConnections || entries_.size() > peak_ / 2) return false;
    peak_ = entries_.size();
    return true;
  }

 private:
  const size_t cap_;
  Mutex mu_;
  std::list<Entry> entries_ GUARDED_BY(mu_);
  size_t evicted_ GUARDED_BY(mu_) = 0;
  size_t peak_ GUARDED_BY(mu_) = 0;  // of entries_, since memory was last given back
};

}  // namespace

struct WebhookServer::Impl {
  explicit Impl(WebhookServerOptions o)
      : options(std::move(o)), table(options.max_connections), budget(options.max_buffered_bytes) {}

  WebhookServerOptions options;
  HttpHandler handler;
  ConnectionTable table;
  BodyBudget budget;
  std::unique_ptr<CertificateReloader> certs;
  // Before the io_context: a connection that ends while the io_context goes
  // away still reaches these.
  WorkerPool workers;

  asio::io_context ioc;
  std::optional<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;

  void Accept();
  void Admit(tcp::socket socket);
  // Gives freed heap memory back to the system, on a worker.
  void TrimSoon() {
    workers.Post([] { ::malloc_trim(0); });
  }
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<asio::ssl::context> tls, WebhookServer::Impl& server)
      : tls_(std::move(tls)), stream_(std::move(socket), *tls_), server_(server) {}
  ~Session() {
    const bool fewer = slot_ && server_.table.Remove(*slot_);
    const bool emptied = server_.budget.Release(reserved_);
    if (fewer || emptied) server_.TrimSoon();
  }

  void Run(ConnectionTable::Slot slot) {
    slot_ = slot;
    // The handshake counts against the head's time: a client that opens a
    // connection and sends nothing is gone after head_timeout.
    Tcp().expires_after(server_.options.head_timeout);
    stream_.async_handshake(asio::ssl::stream_base::server, [self = shared_from_this()](error_code ec) {
      if (ec) {
        NVDRA_VLOG(4, "webhook: TLS handshake failed: {}", ec.message());
        return;  // the socket closes with the session
      }
      self->ReadHead();
    });
  }

  // Closes the connection to make room for a new one, unless a request
  // arrived whole meanwhile: then it closes after its answer.
  void Evict() {
    asio::post(stream_.get_executor(), [self = shared_from_this()] {
      if (self->busy_) {
        self->close_after_answer_ = true;
        return;
      }
      NVDRA_VLOG(3, "webhook: {} connections held; closing the one that waited longest for a request",
                 self->server_.options.max_connections);
      self->Tcp().close();
    });
  }

 private:
  beast::tcp_stream& Tcp() { return beast::get_lowest_layer(stream_); }

  // Waits for the first byte of a kept-alive connection's next request
  // (idle_timeout), then reads its head (head_timeout).
  void WaitForNext() {
    if (buffer_.size() > 0) return ReadHead();
    Tcp().expires_after(server_.options.idle_timeout);
    stream_.async_read_some(buffer_.prepare(kFirstRead), [self = shared_from_this()](error_code ec, size_t n) {
      if (ec) return;  // the client went away, or stayed idle too long
      self->buffer_.commit(n);
      self->ReadHead();
    });
  }

  void ReadHead() {
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(server_.options.max_body_bytes);
    Tcp().expires_after(server_.options.head_timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](error_code ec, size_t) { self->OnHead(ec); });
  }

  // An error of the request itself is answered; a connection that failed
  // is dropped. True when `ec` ended the request.
  bool Refused(error_code ec) {
    if (!ec) return false;
    if (ec == http::error::end_of_stream || ec == asio::ssl::error::stream_truncated) {
      Close();
      return true;
    }
    if (ec == http::error::body_limit) {
      Refuse(413, "request body larger than " + std::to_string(server_.options.max_body_bytes) + " bytes");
    } else if (ec == http::error::header_limit) {
      Refuse(431, "request head larger than " + std::to_string(kHeaderLimit) + " bytes");
    } else if (ec.category() == http::make_error_code(http::error::bad_version).category()) {
      Refuse(400, "bad request: " + ec.message());  // a malformed request
    } else {
      NVDRA_VLOG(4, "webhook: connection dropped: {}", ec.message());
    }
    return true;
  }

  void OnHead(error_code ec) {
    if (Refused(ec)) return;
    if (parser_->is_done()) return Dispatch();
    // What the body will hold is reserved before a byte of it is read.
    const auto length = parser_->content_length();  // none: chunked
    const size_t want = length ? static_cast<size_t>(*length) : server_.options.max_body_bytes;
    if (!server_.budget.TryReserve(want)) {
      NVDRA_VLOG(2, "webhook: {} bytes of request bodies held; refusing another", server_.options.max_buffered_bytes);
      return Refuse(503, "too many request bodies in flight; try again");
    }
    reserved_ = want;
    Tcp().expires_after(server_.options.body_timeout);
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](error_code ec, size_t) {
      if (self->Refused(ec)) return;
      self->Dispatch();
    });
  }

  // The request, read whole, goes to a worker; its answer comes back here.
  void Dispatch() {
    busy_ = true;
    server_.table.SetBusy(*slot_, true);
    auto& msg = parser_->get();
    auto req = std::make_shared<HttpRequest>();
    req->method = std::string(msg.method_string());
    req->target = std::string(msg.target());
    if (auto it = msg.find(http::field::content_type); it != msg.end()) req->content_type = std::string(it->value());
    req->body = std::move(msg.body());
    const bool keep_alive = msg.keep_alive();
    parser_.reset();
    server_.workers.Post([self = shared_from_this(), req = std::move(req), keep_alive]() mutable {
      HttpAnswer answer;
      try {
        answer = self->server_.handler(*req);
      } catch (const std::exception& e) {
        NVDRA_ERROR("webhook: answering {} failed: {}", req->target, e.what());
        answer = TextError(500, std::string("internal error: ") + e.what());
      }
      req.reset();
      asio::post(self->stream_.get_executor(), [self, answer = std::move(answer), keep_alive]() mutable {
        self->Answer(std::move(answer), keep_alive);
      });
    });
  }

  // A request refused before it was read whole leaves its rest unread: the
  // answer goes out, then the rest is drained (lingering close), so the
  // client reads the answer instead of a reset.
  void Refuse(int status, const std::string& message) {
    busy_ = true;
    linger_ = true;
    parser_.reset();
    Answer(TextError(status, message), /*keep_alive=*/false);
  }

  void Answer(HttpAnswer answer, bool keep_alive) {
    res_ = {};
    res_.version(11);
    res_.result(static_cast<unsigned>(answer.status));
    res_.set(http::field::content_type, answer.content_type);
    if (answer.content_type.starts_with("text/plain")) res_.set("X-Content-Type-Options", "nosniff");
    res_.body() = std::move(answer.body);
    keep_alive_ = keep_alive && !close_after_answer_;
    res_.keep_alive(keep_alive_);
    res_.prepare_payload();
    Tcp().expires_after(server_.options.body_timeout);
    http::async_write(stream_, res_, [self = shared_from_this()](error_code ec, size_t) { self->OnWritten(ec); });
  }

  void OnWritten(error_code ec) {
    ReleaseRequest();
    if (ec) return;
    if (linger_) return LingerClose();
    if (!keep_alive_ || close_after_answer_) return Close();
    busy_ = false;
    server_.table.SetBusy(*slot_, false);
    WaitForNext();
  }

  // What one request held, given back before the connection waits again.
  void ReleaseRequest() {
    res_ = {};
    if (buffer_.capacity() > kKeptBufferBytes && buffer_.size() == 0) buffer_.shrink_to_fit();
    const size_t held = reserved_;
    reserved_ = 0;
    if (server_.budget.Release(held)) server_.TrimSoon();
  }

  void Close() {
    Tcp().expires_after(server_.options.head_timeout);
    stream_.async_shutdown([self = shared_from_this()](error_code) {});
  }

  // The answer is out: end our side, then read and discard what the client
  // still sends (at most kMaxDrainBytes, for at most kDrainTime) before the
  // socket closes, so closing with unread input does not reset the
  // connection under the answer.
  void LingerClose() {
    error_code ignored;
    Tcp().socket().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
    Tcp().expires_after(kDrainTime);
    Drain();
  }
  void Drain() {
    Tcp().async_read_some(asio::buffer(drain_), [self = shared_from_this()](error_code ec, size_t n) {
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
  std::optional<ConnectionTable::Slot> slot_;
  beast::flat_buffer buffer_{kReadBufferLimit};
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> res_;
  size_t reserved_ = 0;  // of server_.budget, for this request's body
  bool busy_ = false;
  bool keep_alive_ = false;
  bool close_after_answer_ = false;
  bool linger_ = false;
  std::array<char, 4096> drain_{};
  size_t drained_ = 0;
};

}  // namespace

void WebhookServer::Impl::Admit(tcp::socket socket) {
  auto session = std::make_shared<Session>(std::move(socket), certs->Current(), *this);
  ConnectionTable::Admission admission = table.Admit(session);
  if (!admission.slot) {
    NVDRA_VLOG(2, "webhook: {} connections held, each with a request in work; closing a new one",
               options.max_connections);
    return;  // the socket closes with the session
  }
  if (auto evicted = admission.evicted.lock()) evicted->Evict();
  session->Run(*admission.slot);
}

void WebhookServer::Impl::Accept() {
  acceptor->async_accept(asio::make_strand(ioc), [this](error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (!ec) {
      Admit(std::move(socket));
    } else {
      NVDRA_VLOG(1, "webhook: accept: {}", ec.message());
    }
    Accept();
  });
}

namespace {

// Binds the first of the endpoints that can be bound: dual-stack IPv6 where
// the kernel allows, IPv4 alone on hosts without IPv6.
Result<tcp::acceptor> Listen(asio::io_context& ioc, const WebhookServerOptions& options) {
  error_code ec;
  const auto port = static_cast<unsigned short>(options.port);
  std::vector<tcp::endpoint> endpoints;
  if (options.host.empty()) {
    endpoints = {tcp::endpoint(tcp::v6(), port), tcp::endpoint(tcp::v4(), port)};
  } else {
    auto addr = asio::ip::make_address(options.host, ec);
    if (ec) return InvalidArgument("webhook address " + options.host + ": " + ec.message());
    endpoints = {tcp::endpoint(addr, port)};
  }
  std::string last_error;
  for (const tcp::endpoint& ep : endpoints) {
    tcp::acceptor acceptor(ioc);
    acceptor.open(ep.protocol(), ec);
    if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec && ep.protocol() == tcp::v6()) acceptor.set_option(asio::ip::v6_only(false), ec);
    if (!ec) acceptor.bind(ep, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) return acceptor;
    last_error = ec.message();
  }
  return Unavailable("webhook: cannot listen on port " + std::to_string(options.port) + ": " + last_error);
}

}  // namespace

Result<std::unique_ptr<WebhookServer>> WebhookServer::Start(WebhookServerOptions options, HttpHandler handler) {
  if (options.port < 0 || options.port > 65535) {
    return InvalidArgument("--port " + std::to_string(options.port) + ": must be from 0 to 65535");
  }
  options.max_connections = std::max<size_t>(options.max_connections, 1);
  options.max_buffered_bytes = std::max(options.max_buffered_bytes, options.max_body_bytes);
  options.io_threads = std::max(options.io_threads, 1);
  options.workers = std::max(options.workers, 1);
  NVDRA_ASSIGN_OR_RETURN(auto certs,
                         CertificateReloader::Start(options.cert_file, options.key_file, options.cert_check_interval));
  std::unique_ptr<WebhookServer> server(new WebhookServer());
  server->impl_ = std::make_unique<Impl>(std::move(options));
  Impl& impl = *server->impl_;
  impl.handler = std::move(handler);
  impl.certs = std::move(certs);
  NVDRA_ASSIGN_OR_RETURN(auto acceptor, Listen(impl.ioc, impl.options));
  impl.acceptor.emplace(std::move(acceptor));
  server->port_ = impl.acceptor->local_endpoint().port();
  impl.workers.Start(impl.options.workers);
  impl.Accept();
  for (int i = 0; i < impl.options.io_threads; ++i) {
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
  impl_->threads.clear();
  // The handlers in work return (each is bounded by the body limit); the
  // requests not started are dropped with their connections.
  impl_->workers.Stop();
  impl_->certs->Stop();
  impl_.reset();
}

}  // namespace nvdra::admission
