// The HTTP endpoint behind --http-endpoint / --metrics-path: serves a
// MetricRegistry in the Prometheus text format and a trivial /healthz. It runs
// on its own threads so a slow scraper never touches the gRPC path.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "metrics/metric_registry.h"
#include "util/status.h"

namespace nvdra::metrics {

struct HostPort {
  std::string host;  // empty: all interfaces
  int port = 0;      // 0: the kernel picks a free port
};

// Parses "host:port", ":port" or "[v6addr]:port" as the upstream flag accepts.
Result<HostPort> ParseEndpoint(std::string_view endpoint);

struct MetricsServerOptions {
  std::string endpoint = {};  // --http-endpoint, e.g. ":8080" or "127.0.0.1:0"
  std::string metrics_path = "/metrics";
  // Worker threads; scrapes are rare, so a couple keep the footprint small.
  size_t threads = 2;
};

class MetricsServer {
 public:
  // `registry` must outlive the server.
  MetricsServer(const MetricRegistry& registry, MetricsServerOptions options);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Binds and starts serving. A bad endpoint or a port that cannot be bound
  // is returned as an error; nothing is left running then.
  Status Start();
  // Stops serving and joins the threads. Idempotent.
  void Stop();

  // The bound port (useful with port 0); 0 before Start.
  int port() const { return port_; }
  bool running() const;

 private:
  struct Impl;
  const MetricRegistry& registry_;
  MetricsServerOptions options_;
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace nvdra::metrics
