// The plugin's metric set: the upstream driver's `nvidia_dra_*` metrics with
// the same names, labels and buckets (dashboards keep working), plus nvdra's
// own per-step latency, ledger, reconcile and slice-sync metrics. The engine
// calls the small methods below; every series it will use on the hot path is
// created up front so updates are lock-free and rate() sees zeros, not gaps.
// docs/metrics.md lists every metric.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "metrics/metric_registry.h"
#include "util/mutex.h"
#include "util/request_steps.h"
#include "util/status.h"

namespace nvdra::metrics {

enum class Operation { kPrepare, kUnprepare };

// The steps of one claim's prepare, in order (see DESIGN "the flow of one claim").
enum class PrepareStep { kFetchClaim, kLedgerBegin, kDevicePrepare, kCdiWrite, kLedgerComplete };
inline constexpr size_t kPrepareStepCount = 5;
std::string_view PrepareStepName(PrepareStep step);

// Upstream error_type label values.
inline constexpr std::string_view kErrorLockAcquire = "lock_acquire";
inline constexpr std::string_view kErrorPrepareDevices = "prepare_devices";
inline constexpr std::string_view kErrorUnprepareDevices = "unprepare_devices";
inline constexpr std::string_view kErrorPublishResources = "publish_resources";

// Buckets of nvidia_dra_request_duration_seconds, as upstream.
// nvdra_device_health_monitor's states: not asked for (no gate, no health
// streaming, or a kind without device health), watching, or asked for but
// failed to start (the plugin serves claims without it).
inline constexpr std::array<std::string_view, 3> kHealthMonitorStates = {"off", "running", "failed"};

inline const std::vector<double> kUpstreamRequestBuckets = {0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8};
// Buckets of nvdra_prepare_step_duration_seconds: fine at the low end where
// ledger steps live, and up to 120 s because passthrough and IMEX prepares can
// take tens of seconds (the kubelet gives up at 45 s).
inline const std::vector<double> kStepBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                                 2.5,   5,      10,    20,   30,    45,   60,  90,   120};

struct DraMetricsOptions {
  std::string driver = {};  // the driver label of every series
  std::string node = {};    // node name, label of nvidia_dra_prepared_devices
  // device_type values pre-created at 0 and reset to 0 when absent from
  // SetPreparedDeviceCounts: the device kind's MetricDeviceTypes().
  std::vector<std::string> device_types = {};
  // Ledger states pre-created at 0 and reset to 0 when absent from
  // SetLedgerClaimCounts.
  std::vector<std::string> ledger_states = {};
};

class DraMetrics {
 public:
  // Registers every family in `registry` (which must outlive the result).
  // Fails if the registry already holds one of the names.
  static Result<std::unique_ptr<DraMetrics>> Create(MetricRegistry& registry, DraMetricsOptions options);

  // One finished NodePrepareResources / NodeUnprepareResources claim. As
  // upstream, the counter and histogram only count successes; failures are
  // counted through Record*Error with their error type.
  void ObservePrepare(double seconds, bool ok) { Observe(Operation::kPrepare, seconds, ok); }
  void ObserveUnprepare(double seconds, bool ok) { Observe(Operation::kUnprepare, seconds, ok); }
  void Observe(Operation op, double seconds, bool ok);

  // nvidia_dra_requests_inflight. Prefer InflightScope.
  void IncInflight(Operation op);
  void DecInflight(Operation op);

  class InflightScope {
   public:
    InflightScope(DraMetrics& m, Operation op) : m_(&m), op_(op) { m_->IncInflight(op_); }
    InflightScope(const InflightScope&) = delete;
    InflightScope& operator=(const InflightScope&) = delete;
    ~InflightScope() { m_->DecInflight(op_); }

   private:
    DraMetrics* m_;
    Operation op_;
  };

  void RecordPrepareError(std::string_view error_type);
  void RecordUnprepareError(std::string_view error_type);

  void ObservePrepareStep(PrepareStep step, double seconds);

  // Adds a timed request's steps to nvdra_request_step_seconds_total
  // {operation, step}; `whole_request` (the gRPC thread's record of one
  // call) also counts the call in nvdra_request_steps_recorded_total. The
  // mean time of a step per call is the ratio of the two.
  void AddRequestSteps(Operation op, const RequestSteps& steps, bool whole_request);

  // nvidia_dra_prepared_devices{device_type}.
  void SetPreparedDevices(std::string_view device_type, double n);
  // Sets every type: the given counts, 0 for known types not in `counts`
  // (upstream recomputes from completed claims after each ledger write).
  void SetPreparedDeviceCounts(const std::map<std::string, int64_t>& counts);

  void SetLedgerClaims(std::string_view state, double n);
  void SetLedgerClaimCounts(const std::map<std::string, int64_t>& counts);
  void SetLedgerBytes(double bytes);
  // What sets the prepared-devices and ledger gauges, run before each scrape
  // rather than after each request: the counts cost nothing per claim and
  // are current when read. Empty clears
  // it; clearing waits for a refresh in progress, so the owner of `refresh`
  // may go once this returns.
  void SetGaugeRefresh(std::function<void()> refresh);

  // result: "success" or "error" (others allowed).
  void RecordReconcileRun(std::string_view result);
  void RecordReconcileUnprepared(std::string_view reason, double n = 1);
  void SetStaleCompletedClaims(double n);
  void RecordSliceSync(std::string_view result);

  // The device health monitor's state, one of kHealthMonitorStates: 1 for
  // it, 0 for the others. "off" (not asked for) until set.
  void SetHealthMonitor(std::string_view state);

  // nvdra_resource_slices_published: whether the last ResourceSlice sync
  // succeeded (0 until one has).
  void SetSlicesPublished(bool published);

  const std::string& driver() const { return options_.driver; }

 private:
  explicit DraMetrics(DraMetricsOptions options) : options_(std::move(options)) {}
  static size_t Index(Operation op) { return op == Operation::kPrepare ? 0 : 1; }

  // Steps of Create: register the families upstream's driver exports, then
  // nvdra's own, then resolve the hot-path series and pre-create the rest.
  Status AddUpstreamFamilies(MetricRegistry& registry);
  Status AddNvdraFamilies(MetricRegistry& registry);
  Status AddRequestStepFamilies(MetricRegistry& registry);
  void ResolveSeries();

  DraMetricsOptions options_;

  CounterFamily* requests_total_ = nullptr;
  HistogramFamily* request_duration_ = nullptr;
  GaugeFamily* inflight_ = nullptr;
  GaugeFamily* prepared_devices_ = nullptr;
  CounterFamily* prepare_errors_ = nullptr;
  CounterFamily* unprepare_errors_ = nullptr;
  HistogramFamily* step_duration_ = nullptr;
  GaugeFamily* ledger_claims_ = nullptr;
  GaugeFamily* ledger_bytes_ = nullptr;
  CounterFamily* reconcile_runs_ = nullptr;
  CounterFamily* reconcile_unprepared_ = nullptr;
  GaugeFamily* stale_completed_ = nullptr;
  CounterFamily* slice_sync_ = nullptr;
  GaugeFamily* health_monitor_ = nullptr;
  GaugeFamily* slices_published_ = nullptr;

  // Hot-path series, resolved once.
  std::array<Counter*, 2> requests_{};
  std::array<Histogram*, 2> durations_{};
  std::array<Gauge*, 2> inflight_series_{};
  std::array<Histogram*, kPrepareStepCount> steps_{};
  CounterFamily* request_step_seconds_ = nullptr;
  CounterFamily* request_steps_recorded_ = nullptr;
  std::array<std::array<Counter*, kRequestStepCount>, 2> request_step_series_{};
  std::array<Counter*, 2> request_steps_recorded_series_{};
  Gauge* ledger_bytes_series_ = nullptr;
  Gauge* stale_completed_series_ = nullptr;

  // Shared with the registry's refresh hook, which may outlive this object.
  struct GaugeRefresh {
    Mutex mu;
    std::function<void()> refresh GUARDED_BY(mu);
  };
  std::shared_ptr<GaugeRefresh> gauge_refresh_ = std::make_shared<GaugeRefresh>();

  // Every label value ever set, so a full update can zero the ones now absent.
  Mutex seen_mu_;
  std::set<std::string> seen_device_types_ GUARDED_BY(seen_mu_);
  std::set<std::string> seen_ledger_states_ GUARDED_BY(seen_mu_);
};

}  // namespace nvdra::metrics
