// The HTTP endpoint behind --http-endpoint / --metrics-path: serves a
// MetricRegistry in the Prometheus text format and a trivial /healthz. One
// thread multiplexes every connection with poll(), and each connection has a
// deadline for sending its request and reading the answer, so no client (a
// half-sent request, a reader that never reads, a flood of idle connections)
// can hold a worker and stall scrapes. The gRPC path never touches it.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "metrics/metric_registry.h"
#include "util/status.h"

namespace nvdra::metrics {

struct HostPort {
  std::string host;  // empty: all interfaces
  int port = 0;      // 0: the kernel picks a free port
};

// Parses "host:port", ":port" or "[v6addr]:port" as the upstream flag accepts.
Result<HostPort> ParseEndpoint(std::string_view endpoint);

// The scrape's own metrics, which upstream's /metrics carries (client_golang's
// promhttp.InstrumentMetricHandler): promhttp_metric_handler_requests_total
// {code} (codes 200, 500 and 503 from the start; a scrape is counted once
// answered) and promhttp_metric_handler_requests_in_flight (a page shows the
// scrape that renders it). Only requests for the metrics path count.
struct HandlerMetrics {
  // Registers both families in `registry`, which must outlive them.
  static Result<HandlerMetrics> Create(MetricRegistry& registry);
  CounterFamily* requests = nullptr;
  Gauge* in_flight = nullptr;
};

struct MetricsServerOptions {
  std::string endpoint = {};  // --http-endpoint, e.g. ":8080" or "127.0.0.1:0"
  std::string metrics_path = "/metrics";
  // How long a connection may take from accept to its answer being sent;
  // a slower client is disconnected. Prometheus sends its request at once.
  std::chrono::milliseconds connection_timeout{10'000};
  // Connections held at once; a new one beyond this closes the oldest, so a
  // flood of idle connections cannot lock scrapes out.
  size_t max_connections = 128;
  // The scrape's own metrics (their families live in the registry served);
  // none: scrapes are not counted.
  HandlerMetrics handler_metrics = {};
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
  // Stops serving, closes every connection and joins the thread. Idempotent.
  void Stop();

  // The bound port (useful with port 0); 0 before Start.
  int port() const { return port_; }
  bool running() const;

 private:
  struct Impl;
  const MetricRegistry& registry_;
  MetricsServerOptions options_;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace nvdra::metrics
