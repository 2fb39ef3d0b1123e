#include "metrics/dra_metrics.h"

namespace nvdra::metrics {

namespace {

constexpr std::array<std::string_view, 2> kOperationNames = {"prepare", "unprepare"};
constexpr std::array<PrepareStep, kPrepareStepCount> kAllSteps = {PrepareStep::kFetchClaim, PrepareStep::kLedgerBegin,
                                                                  PrepareStep::kDevicePrepare, PrepareStep::kCdiWrite,
                                                                  PrepareStep::kLedgerComplete};

// Upstream registers through component-base, which prefixes HELP with the
// stability level; keep it so the pages read the same.
std::string Alpha(std::string_view help) { return "[ALPHA] " + std::string(help); }

}  // namespace

std::string_view PrepareStepName(PrepareStep step) {
  switch (step) {
    case PrepareStep::kFetchClaim: return "fetch_claim";
    case PrepareStep::kLedgerBegin: return "ledger_begin";
    case PrepareStep::kDevicePrepare: return "device_prepare";
    case PrepareStep::kCdiWrite: return "cdi_write";
    case PrepareStep::kLedgerComplete: return "ledger_complete";
  }
  return "unknown";
}

Result<std::unique_ptr<DraMetrics>> DraMetrics::Create(MetricRegistry& registry, DraMetricsOptions options) {
  if (options.driver.empty()) return InvalidArgument("metrics: the driver name must not be empty");
  std::unique_ptr<DraMetrics> m(new DraMetrics(std::move(options)));
  NVDRA_RETURN_IF_ERROR(m->AddUpstreamFamilies(registry));
  NVDRA_RETURN_IF_ERROR(m->AddNvdraFamilies(registry));
  NVDRA_RETURN_IF_ERROR(m->AddRequestStepFamilies(registry));
  m->ResolveSeries();
  registry.AddRefreshHook([r = m->gauge_refresh_] {
    MutexLock lock(r->mu);
    if (r->refresh) r->refresh();
  });
  return m;
}

Status DraMetrics::AddUpstreamFamilies(MetricRegistry& registry) {
  NVDRA_ASSIGN_OR_RETURN(requests_total_, registry.AddCounter("nvidia_dra_requests_total",
                                                              Alpha("Total number of successful DRA requests "
                                                                    "(prepare, unprepare) handled by the plugin."),
                                                              {"driver", "operation"}));
  NVDRA_ASSIGN_OR_RETURN(request_duration_,
                         registry.AddHistogram("nvidia_dra_request_duration_seconds",
                                               Alpha("Duration of successful DRA requests in seconds, including lock "
                                                     "wait."),
                                               {"driver", "operation"}, kUpstreamRequestBuckets));
  NVDRA_ASSIGN_OR_RETURN(inflight_, registry.AddGauge("nvidia_dra_requests_inflight",
                                                      Alpha("Number of DRA requests currently being "
                                                            "processed."),
                                                      {"driver", "operation"}));
  NVDRA_ASSIGN_OR_RETURN(prepared_devices_, registry.AddGauge("nvidia_dra_prepared_devices",
                                                              Alpha("Number of devices held by completely prepared "
                                                                    "claims on this node, by device type."),
                                                              {"node", "driver", "device_type"}));
  NVDRA_ASSIGN_OR_RETURN(prepare_errors_, registry.AddCounter("nvidia_dra_node_prepare_errors_total",
                                                              Alpha("Total number of failed prepare requests, by "
                                                                    "error type."),
                                                              {"driver", "error_type"}));
  NVDRA_ASSIGN_OR_RETURN(unprepare_errors_, registry.AddCounter("nvidia_dra_node_unprepare_errors_total",
                                                                Alpha("Total number of failed unprepare requests, by "
                                                                      "error type."),
                                                                {"driver", "error_type"}));
  return Status::Ok();
}

Status DraMetrics::AddNvdraFamilies(MetricRegistry& registry) {
  NVDRA_ASSIGN_OR_RETURN(step_duration_,
                         registry.AddHistogram("nvdra_prepare_step_duration_seconds",
                                               "Duration of each step of one claim's prepare in seconds, successful "
                                               "or not.",
                                               {"driver", "step"}, kStepBuckets));
  NVDRA_ASSIGN_OR_RETURN(ledger_claims_,
                         registry.AddGauge("nvdra_ledger_claims", "Number of claims recorded in the ledger, by state.",
                                           {"driver", "state"}));
  NVDRA_ASSIGN_OR_RETURN(ledger_bytes_,
                         registry.AddGauge("nvdra_ledger_bytes", "Size of the ledger on disk in bytes.", {"driver"}));
  NVDRA_ASSIGN_OR_RETURN(reconcile_runs_,
                         registry.AddCounter("nvdra_reconcile_runs_total",
                                             "Total number of reconciler passes, by result.", {"driver", "result"}));
  NVDRA_ASSIGN_OR_RETURN(reconcile_unprepared_,
                         registry.AddCounter("nvdra_reconcile_unprepared_total",
                                             "Total number of claims the reconciler unprepared on "
                                             "its own, by reason.",
                                             {"driver", "reason"}));
  NVDRA_ASSIGN_OR_RETURN(stale_completed_, registry.AddGauge("nvdra_stale_completed_claims",
                                                             "Number of completed claims whose ResourceClaim is gone "
                                                             "from the API server at the last reconcile.",
                                                             {"driver"}));
  NVDRA_ASSIGN_OR_RETURN(slice_sync_, registry.AddCounter("nvdra_slice_sync_total",
                                                          "Total number of ResourceSlice synchronisations, by "
                                                          "result.",
                                                          {"driver", "result"}));
  NVDRA_ASSIGN_OR_RETURN(health_monitor_,
                         registry.AddGauge("nvdra_device_health_monitor",
                                           "The device health monitor's state: 1 for the state it is in "
                                           "(off, running, failed to start), 0 for the others.",
                                           {"driver", "state"}));
  NVDRA_ASSIGN_OR_RETURN(slices_published_,
                         registry.AddGauge("nvdra_resource_slices_published",
                                           "1 while the node's ResourceSlices are as the last sync wrote "
                                           "them; 0 before the first sync succeeded and after one failed "
                                           "(API server unreachable, refused writes).",
                                           {"driver"}));
  return Status::Ok();
}

Status DraMetrics::AddRequestStepFamilies(MetricRegistry& registry) {
  NVDRA_ASSIGN_OR_RETURN(request_step_seconds_,
                         registry.AddCounter("nvdra_request_step_seconds_total",
                                             "Seconds that NodePrepareResources and NodeUnprepareResources "
                                             "calls spent in each step, from the handler's entry to its "
                                             "answer (successful or not).",
                                             {"driver", "operation", "step"}));
  NVDRA_ASSIGN_OR_RETURN(request_steps_recorded_,
                         registry.AddCounter("nvdra_request_steps_recorded_total",
                                             "Calls whose steps nvdra_request_step_seconds_total counts.",
                                             {"driver", "operation"}));
  return Status::Ok();
}

void DraMetrics::ResolveSeries() {
  const std::string& d = options_.driver;
  for (size_t i = 0; i < kOperationNames.size(); ++i) {
    LabelValues labels{d, std::string(kOperationNames[i])};
    requests_[i] = &requests_total_->WithLabels(labels);
    durations_[i] = &request_duration_->WithLabels(labels);
    inflight_series_[i] = &inflight_->WithLabels(labels);
  }
  for (auto type : {kErrorLockAcquire, kErrorPrepareDevices, kErrorPublishResources}) {
    prepare_errors_->WithLabels({d, type});
  }
  for (auto type : {kErrorLockAcquire, kErrorUnprepareDevices, kErrorPublishResources}) {
    unprepare_errors_->WithLabels({d, type});
  }
  for (PrepareStep step : kAllSteps) {
    steps_[static_cast<size_t>(step)] = &step_duration_->WithLabels({d, PrepareStepName(step)});
  }
  for (size_t op = 0; op < kOperationNames.size(); ++op) {
    for (size_t i = 0; i < kRequestStepCount; ++i) {
      request_step_series_[op][i] = &request_step_seconds_->WithLabels({d, kOperationNames[op],
                                                                        RequestStepName(static_cast<RequestStep>(i))});
    }
    request_steps_recorded_series_[op] = &request_steps_recorded_->WithLabels({d, kOperationNames[op]});
  }
  for (const auto& t : options_.device_types) SetPreparedDevices(t, 0);
  for (const auto& s : options_.ledger_states) SetLedgerClaims(s, 0);
  ledger_bytes_series_ = &ledger_bytes_->WithLabels({d});
  stale_completed_series_ = &stale_completed_->WithLabels({d});
  for (auto r : {"success", "error"}) {
    reconcile_runs_->WithLabels({d, r});
    slice_sync_->WithLabels({d, r});
  }
  SetHealthMonitor("off");
  SetSlicesPublished(false);
}

void DraMetrics::Observe(Operation op, double seconds, bool ok) {
  if (!ok) return;
  requests_[Index(op)]->Inc();
  durations_[Index(op)]->Observe(seconds);
}

void DraMetrics::IncInflight(Operation op) { inflight_series_[Index(op)]->Inc(); }
void DraMetrics::DecInflight(Operation op) { inflight_series_[Index(op)]->Dec(); }

void DraMetrics::RecordPrepareError(std::string_view error_type) {
  prepare_errors_->WithLabels({options_.driver, error_type}).Inc();
}

void DraMetrics::RecordUnprepareError(std::string_view error_type) {
  unprepare_errors_->WithLabels({options_.driver, error_type}).Inc();
}

void DraMetrics::ObservePrepareStep(PrepareStep step, double seconds) {
  steps_[static_cast<size_t>(step)]->Observe(seconds);
}

void DraMetrics::AddRequestSteps(Operation op, const RequestSteps& steps, bool whole_request) {
  const auto& series = request_step_series_[Index(op)];
  for (size_t i = 0; i < kRequestStepCount; ++i) {
    const int64_t ns = steps.nanos(static_cast<RequestStep>(i));
    // Exclude() may leave a step a little below zero (clock reads on two
    // threads); a counter never goes down, so such a step adds nothing.
    if (ns > 0) series[i]->Inc(static_cast<double>(ns) * 1e-9);
  }
  if (whole_request) request_steps_recorded_series_[Index(op)]->Inc();
}

void DraMetrics::SetPreparedDevices(std::string_view device_type, double n) {
  {
    MutexLock lock(seen_mu_);
    seen_device_types_.emplace(device_type);
  }
  prepared_devices_->WithLabels({options_.node, options_.driver, device_type}).Set(n);
}

void DraMetrics::SetPreparedDeviceCounts(const std::map<std::string, int64_t>& counts) {
  std::set<std::string> all;
  {
    MutexLock lock(seen_mu_);
    all = seen_device_types_;
  }
  for (const auto& [type, n] : counts) all.insert(type);
  for (const auto& type : all) {
    auto it = counts.find(type);
    SetPreparedDevices(type, it == counts.end() ? 0.0 : static_cast<double>(it->second));
  }
}

void DraMetrics::SetLedgerClaims(std::string_view state, double n) {
  {
    MutexLock lock(seen_mu_);
    seen_ledger_states_.emplace(state);
  }
  ledger_claims_->WithLabels({options_.driver, state}).Set(n);
}

void DraMetrics::SetLedgerClaimCounts(const std::map<std::string, int64_t>& counts) {
  std::set<std::string> all;
  {
    MutexLock lock(seen_mu_);
    all = seen_ledger_states_;
  }
  for (const auto& [state, n] : counts) all.insert(state);
  for (const auto& state : all) {
    auto it = counts.find(state);
    SetLedgerClaims(state, it == counts.end() ? 0.0 : static_cast<double>(it->second));
  }
}

void DraMetrics::SetLedgerBytes(double bytes) { ledger_bytes_series_->Set(bytes); }

void DraMetrics::SetGaugeRefresh(std::function<void()> refresh) {
  MutexLock lock(gauge_refresh_->mu);
  gauge_refresh_->refresh = std::move(refresh);
}

void DraMetrics::RecordReconcileRun(std::string_view result) {
  reconcile_runs_->WithLabels({options_.driver, result}).Inc();
}

void DraMetrics::RecordReconcileUnprepared(std::string_view reason, double n) {
  reconcile_unprepared_->WithLabels({options_.driver, reason}).Inc(n);
}

void DraMetrics::SetStaleCompletedClaims(double n) { stale_completed_series_->Set(n); }

void DraMetrics::RecordSliceSync(std::string_view result) { slice_sync_->WithLabels({options_.driver, result}).Inc(); }

void DraMetrics::SetSlicesPublished(bool published) {
  slices_published_->WithLabels({options_.driver}).Set(published ? 1 : 0);
}

void DraMetrics::SetHealthMonitor(std::string_view state) {
  for (std::string_view s : kHealthMonitorStates) {
    health_monitor_->WithLabels({options_.driver, s}).Set(s == state ? 1 : 0);
  }
}

}  // namespace nvdra::metrics
