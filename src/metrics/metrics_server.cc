#include "metrics/metrics_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <exception>
#include <thread>
#include <vector>

#include "util/log.h"
#include "util/thread_name.h"

namespace nvdra::metrics {

Result<HostPort> ParseEndpoint(std::string_view endpoint) {
  auto bad = [&](std::string_view why) {
    return InvalidArgument("--http-endpoint \"" + std::string(endpoint) + "\": " + std::string(why) +
                           " (expected host:port, :port or [ipv6]:port)");
  };
  size_t colon = endpoint.rfind(':');
  if (colon == std::string_view::npos) return bad("missing the port");
  std::string_view host = endpoint.substr(0, colon);
  std::string_view port = endpoint.substr(colon + 1);
  if (host.starts_with('[')) {
    if (!host.ends_with(']') || host.size() < 3) return bad("unbalanced brackets");
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return bad("an IPv6 address must be written in brackets");
  }
  if (port.empty() || port.size() > 5) return bad("the port must be a number from 0 to 65535");
  int p = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return bad("the port must be a number from 0 to 65535");
    p = p * 10 + (c - '0');
  }
  if (p > 65535) return bad("the port must be a number from 0 to 65535");
  return HostPort{std::string(host), p};
}

Result<HandlerMetrics> HandlerMetrics::Create(MetricRegistry& registry) {
  HandlerMetrics m;
  NVDRA_ASSIGN_OR_RETURN(m.requests, registry.AddCounter("promhttp_metric_handler_requests_total",
                                                         "Total number of scrapes by HTTP status code.", {"code"}));
  for (const char* code : {"200", "500", "503"}) m.requests->WithLabels({code});
  NVDRA_ASSIGN_OR_RETURN(GaugeFamily * in_flight, registry.AddGauge("promhttp_metric_handler_requests_in_flight",
                                                                    "Current number of scrapes being served."));
  m.in_flight = &in_flight->WithLabels(LabelValues{});
  return m;
}

namespace {

using Steady = std::chrono::steady_clock;

// A request head larger than this is not a scrape.
constexpr size_t kMaxRequestBytes = 16 * 1024;

struct Connection {
  enum class State { kReading, kWriting, kDraining };
  int fd = -1;
  Steady::time_point deadline;
  State state = State::kReading;
  std::string in;
  std::string out;
  size_t sent = 0;
  bool done = false;
};

std::string Reply(int code, std::string_view reason, std::string_view content_type, const std::string& body,
                  bool head_only, std::string_view extra_headers = "") {
  std::string out = "HTTP/1.1 " + std::to_string(code) + " " + std::string(reason) + "\r\n";
  out += "Content-Type: " + std::string(content_type) + "\r\n";
  out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  out += extra_headers;
  // One request per connection keeps a connection's life bounded by its
  // deadline; scrapers reconnect cheaply.
  out += "Connection: close\r\n\r\n";
  if (!head_only) out += body;
  return out;
}

// The end of the request head in `in`, or npos while it is incomplete.
size_t HeadEnd(const std::string& in) {
  size_t crlf = in.find("\r\n\r\n");
  size_t lf = in.find("\n\n");
  return std::min(crlf, lf);
}

// Listens on host:port (a name or a literal; v6 sockets accept v4 too).
int ListenOn(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) return -1;
  int fd = -1;
  for (addrinfo* ai = res; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) continue;
    // SO_REUSEADDR alone allows a quick restart while old connections sit
    // in TIME_WAIT; SO_REUSEPORT would let a second process share the port
    // and silently take half the scrapes.
    int yes = 1, no = 0;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (ai->ai_family == AF_INET6) ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof(no));
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return -1;
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

}  // namespace

struct MetricsServer::Impl {
  const MetricRegistry* registry = nullptr;
  MetricsServerOptions options;
  int listen_fd = -1;
  int wake_fd = -1;
  std::atomic<bool> stopping{false};
  std::atomic<bool> serving{false};
  std::thread thread;
  std::deque<Connection> conns;  // in accept order: the front is the oldest

  ~Impl() {
    for (auto& c : conns) ::close(c.fd);
    if (listen_fd >= 0) ::close(listen_fd);
    if (wake_fd >= 0) ::close(wake_fd);
  }

  std::string Answer(std::string_view head) const {
    std::string_view line = head.substr(0, head.find_first_of("\r\n"));
    size_t sp1 = line.find(' ');
    size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos || !line.substr(sp2 + 1).starts_with("HTTP/1.")) {
      return Reply(400, "Bad Request", "text/plain; charset=utf-8", "bad request\n", false);
    }
    std::string_view method = line.substr(0, sp1);
    std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    std::string_view path = target.substr(0, target.find('?'));
    bool known = path == options.metrics_path || path == "/healthz";
    if (!known) return Reply(404, "Not Found", "text/plain; charset=utf-8", "404 page not found\n", method == "HEAD");
    if (method != "GET" && method != "HEAD") {
      return Reply(405, "Method Not Allowed", "text/plain; charset=utf-8", "method not allowed\n", false,
                   "Allow: GET, HEAD\r\n");
    }
    if (path == "/healthz") return Reply(200, "OK", "text/plain; charset=utf-8", "ok", method == "HEAD");
    const HandlerMetrics& hm = options.handler_metrics;
    if (hm.in_flight != nullptr) hm.in_flight->Inc();
    std::string code = "200";
    std::string reply;
    try {
      reply = Reply(200, "OK", kTextContentType, registry->Render(), method == "HEAD");
    } catch (const std::exception& e) {
      code = "500";
      reply = Reply(500, "Internal Server Error", "text/plain; charset=utf-8",
                    std::string("rendering metrics failed: ") + e.what() + "\n", false);
    }
    if (hm.in_flight != nullptr) hm.in_flight->Dec();
    if (hm.requests != nullptr) hm.requests->WithLabels({code}).Inc();
    return reply;
  }

  void OnReadable(Connection& c) {
    char buf[4096];
    bool eof = false;
    for (;;) {
      ssize_t n = ::recv(c.fd, buf, sizeof(buf), 0);
      if (n > 0) {
        if (c.state != Connection::State::kReading) continue;  // draining: discard
        c.in.append(buf, static_cast<size_t>(n));
        if (c.in.size() > kMaxRequestBytes) break;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      eof = true;  // closed by the peer, or an error
      break;
    }
    if (c.state == Connection::State::kDraining) {
      c.done = eof;
      return;
    }
    size_t end = HeadEnd(c.in);
    if (end != std::string::npos) {
      c.out = Answer(std::string_view(c.in).substr(0, end));
      c.state = Connection::State::kWriting;
    } else if (c.in.size() > kMaxRequestBytes) {
      c.out = Reply(431, "Request Header Fields Too Large", "text/plain; charset=utf-8", "request too large\n", false);
      c.state = Connection::State::kWriting;
    } else if (eof) {
      c.done = true;
    }
  }

  void OnWritable(Connection& c) {
    while (c.sent < c.out.size()) {
      ssize_t n = ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
      if (n > 0) {
        c.sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      c.done = true;
      return;
    }
    // Answered. Closing with unread input would reset the connection and
    // could cost the client the answer's tail, so end our side and read
    // until the client closes (or the deadline).
    ::shutdown(c.fd, SHUT_WR);
    c.state = Connection::State::kDraining;
  }

  void Accept() {
    for (;;) {
      int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          NVDRA_VLOG(1, "metrics server: accept: {}", std::strerror(errno));
        }
        return;
      }
      if (conns.size() >= options.max_connections) {
        ::close(conns.front().fd);
        conns.pop_front();
      }
      Connection c;
      c.fd = fd;
      c.deadline = Steady::now() + options.connection_timeout;
      conns.push_back(std::move(c));
    }
  }

  void Loop() {
    std::vector<pollfd> fds;
    while (!stopping.load()) {
      auto now = Steady::now();
      for (auto it = conns.begin(); it != conns.end();) {
        if (it->done || now >= it->deadline) {  // finished, or too slow: cut off
          ::close(it->fd);
          it = conns.erase(it);
        } else {
          ++it;
        }
      }
      int timeout_ms = -1;
      fds.clear();
      fds.push_back({wake_fd, POLLIN, 0});
      fds.push_back({listen_fd, POLLIN, 0});
      for (auto& c : conns) {
        auto left = std::chrono::ceil<std::chrono::milliseconds>(c.deadline - now).count();
        if (timeout_ms < 0 || left < timeout_ms) timeout_ms = static_cast<int>(left);
        fds.push_back({c.fd, static_cast<short>(c.state == Connection::State::kWriting ? POLLOUT : POLLIN), 0});
      }
      int n = ::poll(fds.data(), fds.size(), timeout_ms);
      if (n < 0 && errno != EINTR) {
        NVDRA_ERROR("metrics server stopped serving: poll: {}", std::strerror(errno));
        break;
      }
      if (n > 0) {
        for (size_t i = 0; i < conns.size(); ++i) {
          Connection& c = conns[i];
          short ev = fds[i + 2].revents;
          if (c.done || ev == 0) continue;
          if (ev & (POLLIN | POLLHUP | POLLERR)) {
            if (c.state == Connection::State::kWriting) {
              OnWritable(c);  // an error shows on the write
            } else {
              OnReadable(c);
            }
          }
          if (!c.done && (ev & POLLOUT) && c.state == Connection::State::kWriting) OnWritable(c);
        }
      }
      if (n > 0 && (fds[1].revents & POLLIN)) Accept();
      if (n > 0 && (fds[0].revents & POLLIN)) {
        uint64_t v;
        (void)!::read(wake_fd, &v, sizeof(v));
      }
    }
    serving = false;
  }
};

MetricsServer::MetricsServer(const MetricRegistry& registry, MetricsServerOptions options)
    : registry_(registry), options_(std::move(options)) {}

MetricsServer::~MetricsServer() { Stop(); }

bool MetricsServer::running() const { return impl_ && impl_->serving.load(); }

Status MetricsServer::Start() {
  if (impl_) return FailedPrecondition("metrics server is already started");
  NVDRA_ASSIGN_OR_RETURN(HostPort hp, ParseEndpoint(options_.endpoint));
  if (options_.metrics_path.empty() || options_.metrics_path[0] != '/') {
    return InvalidArgument("--metrics-path \"" + options_.metrics_path + "\" must start with '/'");
  }
  auto impl = std::make_unique<Impl>();
  impl->registry = &registry_;
  impl->options = options_;
  if (impl->options.max_connections == 0) impl->options.max_connections = 1;
  if (hp.host.empty()) {
    // All interfaces: IPv6 any (dual-stack where the kernel allows), falling
    // back to IPv4 any on hosts without IPv6.
    impl->listen_fd = ListenOn("::", hp.port);
    if (impl->listen_fd < 0) impl->listen_fd = ListenOn("0.0.0.0", hp.port);
  } else {
    impl->listen_fd = ListenOn(hp.host, hp.port);
  }
  if (impl->listen_fd < 0) {
    return Unavailable("metrics server: cannot listen on " + options_.endpoint +
                       " (--http-endpoint): the address is in use, not local, or not permitted; "
                       "choose another port or leave --http-endpoint empty to disable metrics");
  }
  impl->wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (impl->wake_fd < 0) return Internal(std::string("metrics server: eventfd: ") + std::strerror(errno));
  port_ = BoundPort(impl->listen_fd);
  impl->serving = true;
  impl->thread = std::thread([i = impl.get()] {
    SetThreadName("metrics-http");
    i->Loop();
  });
  impl_ = std::move(impl);
  NVDRA_INFO("serving metrics on {} port {} at {}", hp.host.empty() ? "all interfaces" : hp.host, port_,
             options_.metrics_path);
  return Status::Ok();
}

void MetricsServer::Stop() {
  if (!impl_) return;
  impl_->stopping = true;
  uint64_t one = 1;
  (void)!::write(impl_->wake_fd, &one, sizeof(one));
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_.reset();
}

}  // namespace nvdra::metrics
