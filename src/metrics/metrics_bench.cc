// Cost of metric updates on the prepare path and of one scrape.
#include <benchmark/benchmark.h>

#include "metrics/dra_metrics.h"
#include "metrics/metric_registry.h"

namespace nvdra::metrics {
namespace {

void BM_CounterInc(benchmark::State& state) {
  static MetricRegistry* r = new MetricRegistry();
  static Counter* c = &r->AddCounter("c_total", "h").value()->WithLabels(LabelValues{});
  for (auto _ : state) c->Inc();
}
BENCHMARK(BM_CounterInc)->Threads(1)->Threads(4);

void BM_HistogramObserve(benchmark::State& state) {
  static MetricRegistry* r = new MetricRegistry();
  static Histogram* h = &r->AddHistogram("h_seconds", "h", {}, kStepBuckets).value()->WithLabels(LabelValues{});
  double v = 0;
  for (auto _ : state) {
    h->Observe(v);
    v = v > 100 ? 0 : v + 0.37;
  }
}
BENCHMARK(BM_HistogramObserve)->Threads(1)->Threads(4);

void BM_WithLabelsLookup(benchmark::State& state) {
  static MetricRegistry* r = new MetricRegistry();
  static CounterFamily* f = r->AddCounter("e_total", "h", {"driver", "error_type"}).value();
  for (auto _ : state) f->WithLabels({"driver.example.com", "prepare_devices"}).Inc();
}
BENCHMARK(BM_WithLabelsLookup)->Threads(1)->Threads(4);

void BM_RenderDraMetrics(benchmark::State& state) {
  MetricRegistry r;
  auto m = DraMetrics::Create(r, {.driver = "driver.example.com",
                                  .node = "n",
                                  .device_types = {"gpu", "mig", "vfio", "unknown"}})
               .value();
  for (int i = 0; i < 1000; ++i) m->ObservePrepare(i * 0.01, true);
  size_t bytes = 0;
  for (auto _ : state) {
    std::string page = r.Render();
    bytes = page.size();
    benchmark::DoNotOptimize(page);
  }
  state.counters["page_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_RenderDraMetrics);

}  // namespace
}  // namespace nvdra::metrics
