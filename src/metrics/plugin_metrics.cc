#include "metrics/plugin_metrics.h"

namespace nvdra::metrics {

Result<std::unique_ptr<PluginMetrics>> PluginMetrics::Start(PluginMetricsOptions options) {
  std::unique_ptr<PluginMetrics> p(new PluginMetrics());
  p->registry_ = std::make_unique<MetricRegistry>();
  NVDRA_ASSIGN_OR_RETURN(p->dra_, DraMetrics::Create(*p->registry_, std::move(options.dra)));
  NVDRA_ASSIGN_OR_RETURN(p->process_, ProcessMetrics::Create(*p->registry_, options.proc_dir, options.pid_dir));
  if (!options.http_endpoint.empty()) {
    NVDRA_ASSIGN_OR_RETURN(HandlerMetrics handler, HandlerMetrics::Create(*p->registry_));
    p->server_ = std::make_unique<MetricsServer>(*p->registry_,
                                                 MetricsServerOptions{.endpoint = options.http_endpoint,
                                                                      .metrics_path = options.metrics_path,
                                                                      .handler_metrics = handler});
    NVDRA_RETURN_IF_ERROR(p->server_->Start());
  }
  return p;
}

PluginMetrics::~PluginMetrics() { Stop(); }

void PluginMetrics::Stop() {
  // The server goes first: a scrape in flight reads the registry.
  if (server_) server_->Stop();
}

}  // namespace nvdra::metrics
