#include "metrics/metrics_server.h"

#include <httplib.h>
#include "util/log.h"

#include <chrono>

namespace nvdra::metrics {

Result<HostPort> ParseEndpoint(std::string_view endpoint) {
  auto bad = [&](std::string_view why) {
    return InvalidArgument("--http-endpoint \"" + std::string(endpoint) + "\": " +
                           std::string(why) + " (expected host:port, :port or [ipv6]:port)");
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

struct MetricsServer::Impl {
  httplib::Server server;
};

MetricsServer::MetricsServer(const MetricRegistry& registry, MetricsServerOptions options)
    : registry_(registry), options_(std::move(options)) {}

MetricsServer::~MetricsServer() { Stop(); }

bool MetricsServer::running() const { return impl_ && impl_->server.is_running(); }

Status MetricsServer::Start() {
  if (impl_) return FailedPrecondition("metrics server is already started");
  NVDRA_ASSIGN_OR_RETURN(HostPort hp, ParseEndpoint(options_.endpoint));
  if (options_.metrics_path.empty() || options_.metrics_path[0] != '/') {
    return InvalidArgument("--metrics-path \"" + options_.metrics_path + "\" must start with '/'");
  }

  auto impl = std::make_unique<Impl>();
  auto& svr = impl->server;
  const size_t threads = options_.threads == 0 ? 1 : options_.threads;
  svr.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // httplib's default sets SO_REUSEPORT, which lets a second process bind the
  // same port and silently take half the scrapes. SO_REUSEADDR alone still
  // allows a quick restart while old connections sit in TIME_WAIT.
  svr.set_socket_options([](int sock) {
    int yes = 1, no = 0, domain = 0;
    socklen_t len = sizeof(domain);
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (getsockopt(sock, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && domain == AF_INET6) {
      setsockopt(sock, IPPROTO_IPV6, IPV6_V6ONLY, &no, sizeof(no));  // dual-stack "::"
    }
  });
  const MetricRegistry* registry = &registry_;
  svr.Get(options_.metrics_path, [registry](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry->Render(), std::string(kTextContentType).c_str());
  });
  svr.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok", "text/plain; charset=utf-8");
  });

  int port = -1;
  std::string shown_host = hp.host.empty() ? "" : hp.host;
  auto bind = [&](const std::string& host) {
    if (hp.port == 0) return svr.bind_to_any_port(host);
    return svr.bind_to_port(host, hp.port) ? hp.port : -1;
  };
  if (hp.host.empty()) {
    // All interfaces: IPv6 any (dual-stack where the kernel allows), falling
    // back to IPv4 any on hosts without IPv6.
    port = bind("::");
    if (port < 0) port = bind("0.0.0.0");
  } else {
    port = bind(hp.host);
  }
  if (port < 0) {
    return Unavailable("metrics server: cannot listen on " + options_.endpoint +
                       " (--http-endpoint): the address is in use, not local, or not permitted; "
                       "choose another port or leave --http-endpoint empty to disable metrics");
  }

  impl_ = std::move(impl);
  port_ = port;
  thread_ = std::thread([s = &impl_->server, endpoint = options_.endpoint] {
    // The gRPC service keeps working without metrics, so a dead accept loop
    // is logged rather than taking the plugin down as upstream does.
    if (!s->listen_after_bind()) NVDRA_ERROR("metrics server on {} stopped serving", endpoint);
  });
  // stop() is a no-op until the accept loop runs, so wait for it: otherwise a
  // Stop right after Start would leave the thread serving forever.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!impl_->server.is_running() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!impl_->server.is_running()) {
    Stop();
    return Internal("metrics server on " + options_.endpoint + " did not start serving");
  }
  NVDRA_INFO("serving metrics on {} port {} at {}", hp.host.empty() ? "all interfaces" : hp.host,
               port_, options_.metrics_path);
  return Status::Ok();
}

void MetricsServer::Stop() {
  if (!impl_) return;
  impl_->server.stop();
  if (thread_.joinable()) thread_.join();
  impl_.reset();
}

}  // namespace nvdra::metrics
