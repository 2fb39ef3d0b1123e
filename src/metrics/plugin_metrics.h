// Everything a plugin binary needs for metrics in one object: the registry,
// the DRA metric set, the process_* metrics and, when --http-endpoint is set,
// the HTTP server. The cmd layer creates one at start-up and hands
// `dra()` to the engine.
#pragma once

#include <memory>
#include <string>

#include "metrics/dra_metrics.h"
#include "metrics/metric_registry.h"
#include "metrics/metrics_server.h"
#include "metrics/process_metrics.h"
#include "util/status.h"

namespace nvdra::metrics {

struct PluginMetricsOptions {
  DraMetricsOptions dra = {};
  std::string http_endpoint = {};         // --http-endpoint; empty: no server
  std::string metrics_path = "/metrics";  // --metrics-path
  std::string proc_dir = "/proc";         // where process_* metrics are read
  std::string pid_dir = "/proc/self";
};

class PluginMetrics {
 public:
  // Builds the metric set and starts the server if an endpoint is given. A
  // bind failure is returned, naming the flag, so start-up can stop with it.
  static Result<std::unique_ptr<PluginMetrics>> Start(PluginMetricsOptions options);
  ~PluginMetrics();

  DraMetrics& dra() { return *dra_; }
  MetricRegistry& registry() { return *registry_; }
  // The bound port, or 0 when no server runs.
  int port() const { return server_ ? server_->port() : 0; }
  void Stop();

 private:
  PluginMetrics() = default;
  // Declared first so it is destroyed last: everything else points into it.
  std::unique_ptr<MetricRegistry> registry_;
  std::unique_ptr<DraMetrics> dra_;
  std::unique_ptr<ProcessMetrics> process_;
  std::unique_ptr<MetricsServer> server_;
};

}  // namespace nvdra::metrics
