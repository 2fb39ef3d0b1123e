#include "metrics/dra_metrics.h"

#include <gtest/gtest.h>

#include <sstream>
#include <thread>

namespace nvdra::metrics {
namespace {

// The rendered value of one exact sample line ("name{labels}"), or "" if absent.
std::string Sample(const std::string& page, const std::string& series) {
  std::istringstream in(page);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with(series + " ")) return line.substr(series.size() + 1);
  }
  return "";
}

std::unique_ptr<DraMetrics> MakeGpu(MetricRegistry& r) {
  auto m = DraMetrics::Create(r, {.driver = "accel.example.com",
                                  .node = "node-a",
                                  .device_types = {"gpu", "mig", "vfio", "unknown"},
                                  .ledger_states = {"PrepareStarted", "PrepareCompleted"}});
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

// One series per state, 1 for the current one: an alert on
// state="failed" works from the first scrape.
TEST(DraMetricsTest, HealthMonitorStateIsOneHot) {
  MetricRegistry r;
  auto m = MakeGpu(r);
  const std::string l = "nvdra_device_health_monitor{driver=\"accel.example.com\",state=";
  std::string page = r.Render();
  EXPECT_EQ(Sample(page, l + "\"off\"}"), "1");
  EXPECT_EQ(Sample(page, l + "\"running\"}"), "0");
  EXPECT_EQ(Sample(page, l + "\"failed\"}"), "0");
  m->SetHealthMonitor("failed");
  page = r.Render();
  EXPECT_EQ(Sample(page, l + "\"off\"}"), "0");
  EXPECT_EQ(Sample(page, l + "\"failed\"}"), "1");
}

TEST(DraMetricsTest, PreCreatesUpstreamSeriesAtZero) {
  MetricRegistry r;
  auto m = MakeGpu(r);
  std::string page = r.Render();
  for (const char* op : {"prepare", "unprepare"}) {
    std::string l = std::string("{driver=\"accel.example.com\",operation=\"") + op + "\"";
    EXPECT_EQ(Sample(page, "nvidia_dra_requests_total" + l + "}"), "0") << op;
    EXPECT_EQ(Sample(page, "nvidia_dra_requests_inflight" + l + "}"), "0") << op;
    EXPECT_EQ(Sample(page, "nvidia_dra_request_duration_seconds_count" + l + "}"), "0") << op;
    EXPECT_EQ(Sample(page, "nvidia_dra_request_duration_seconds_bucket" + l + ",le=\"12.8\"}"), "0");
  }
  for (const char* t : {"gpu", "mig", "vfio", "unknown"}) {
    EXPECT_EQ(Sample(page, std::string("nvidia_dra_prepared_devices{node=\"node-a\",driver=\"accel."
                                       "example.com\",device_type=\"") +
                               t + "\"}"),
              "0");
  }
  EXPECT_EQ(Sample(page, "nvidia_dra_node_prepare_errors_total{driver=\"accel.example.com\","
                         "error_type=\"prepare_devices\"}"),
            "0");
  EXPECT_EQ(Sample(page, "nvidia_dra_node_unprepare_errors_total{driver=\"accel.example.com\","
                         "error_type=\"unprepare_devices\"}"),
            "0");
  for (const char* step : {"fetch_claim", "ledger_begin", "device_prepare", "cdi_write", "ledger_complete"}) {
    EXPECT_EQ(Sample(page, std::string("nvdra_prepare_step_duration_seconds_bucket{driver=\"accel."
                                       "example.com\",step=\"") +
                               step + "\",le=\"120\"}"),
              "0")
        << step;
  }
  EXPECT_EQ(Sample(page, "nvdra_ledger_claims{driver=\"accel.example.com\",state=\"PrepareStarted\"}"), "0");
  EXPECT_EQ(Sample(page, "nvdra_ledger_bytes{driver=\"accel.example.com\"}"), "0");
  EXPECT_EQ(Sample(page, "nvdra_stale_completed_claims{driver=\"accel.example.com\"}"), "0");
  EXPECT_EQ(Sample(page, "nvdra_reconcile_runs_total{driver=\"accel.example.com\",result=\"error\"}"), "0");
  EXPECT_EQ(Sample(page, "nvdra_slice_sync_total{driver=\"accel.example.com\",result=\"success\"}"), "0");
  // Upstream HELP carries the component-base stability prefix.
  EXPECT_NE(page.find("# HELP nvidia_dra_requests_total [ALPHA] "), std::string::npos);
  EXPECT_NE(page.find("# TYPE nvidia_dra_request_duration_seconds histogram"), std::string::npos);
}

TEST(DraMetricsTest, UpstreamBucketsExactly) {
  MetricRegistry r;
  auto m = MakeGpu(r);
  std::string page = r.Render();
  std::string prefix = "nvidia_dra_request_duration_seconds_bucket{driver=\"accel.example.com\",operation=\"prepare\","
                       "le=\"";
  std::vector<std::string> les;
  std::istringstream in(page);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with(prefix))
      les.push_back(line.substr(prefix.size(), line.find('"', prefix.size()) - prefix.size()));
  }
  EXPECT_EQ(les, (std::vector<std::string>{"0.05", "0.1", "0.2", "0.4", "0.8", "1.6", "3.2", "6.4", "12.8", "+Inf"}));
}

TEST(DraMetricsTest, SuccessOnlyCountsAsUpstream) {
  MetricRegistry r;
  auto m = MakeGpu(r);
  m->ObservePrepare(0.3, true);
  m->ObservePrepare(20, false);
  m->ObserveUnprepare(0.01, true);
  m->RecordPrepareError(kErrorPrepareDevices);
  m->RecordPrepareError("fetch_claim");
  std::string page = r.Render();
  EXPECT_EQ(Sample(page, "nvidia_dra_requests_total{driver=\"accel.example.com\",operation=\"prepare\"}"), "1");
  EXPECT_EQ(Sample(page, "nvidia_dra_request_duration_seconds_sum{driver=\"accel.example.com\","
                         "operation=\"prepare\"}"),
            "0.3");
  EXPECT_EQ(Sample(page, "nvidia_dra_request_duration_seconds_bucket{driver=\"accel.example.com\","
                         "operation=\"prepare\",le=\"0.2\"}"),
            "0");
  EXPECT_EQ(Sample(page, "nvidia_dra_request_duration_seconds_bucket{driver=\"accel.example.com\","
                         "operation=\"prepare\",le=\"0.4\"}"),
            "1");
  EXPECT_EQ(Sample(page, "nvidia_dra_requests_total{driver=\"accel.example.com\",operation=\"unprepare\"}"), "1");
  EXPECT_EQ(Sample(page, "nvidia_dra_node_prepare_errors_total{driver=\"accel.example.com\","
                         "error_type=\"prepare_devices\"}"),
            "1");
  EXPECT_EQ(Sample(page, "nvidia_dra_node_prepare_errors_total{driver=\"accel.example.com\","
                         "error_type=\"fetch_claim\"}"),
            "1");
}

TEST(DraMetricsTest, InflightScopeBalances) {
  MetricRegistry r;
  auto m = MakeGpu(r);
  const std::string series = "nvidia_dra_requests_inflight{driver=\"accel.example.com\",operation=\"unprepare\"}";
  {
    DraMetrics::InflightScope a(*m, Operation::kUnprepare);
    DraMetrics::InflightScope b(*m, Operation::kUnprepare);
    EXPECT_EQ(Sample(r.Render(), series), "2");
  }
  EXPECT_EQ(Sample(r.Render(), series), "0");
}

TEST(DraMetricsTest, StepHistogramReachesTwoMinutes) {
  MetricRegistry r;
  auto m = MakeGpu(r);
  m->ObservePrepareStep(PrepareStep::kDevicePrepare, 100);  // a slow passthrough prepare
  m->ObservePrepareStep(PrepareStep::kCdiWrite, 0.002);
  std::string page = r.Render();
  const std::string dev =
      "nvdra_prepare_step_duration_seconds_bucket{driver=\"accel.example.com\",step=\"device_prepare\"";
  EXPECT_EQ(Sample(page, dev + ",le=\"90\"}"), "0");
  EXPECT_EQ(Sample(page, dev + ",le=\"120\"}"), "1");
  const std::string cdi = "nvdra_prepare_step_duration_seconds_bucket{driver=\"accel.example.com\",step=\"cdi_write\"";
  EXPECT_EQ(Sample(page, cdi + ",le=\"0.001\"}"), "0");
  EXPECT_EQ(Sample(page, cdi + ",le=\"0.0025\"}"), "1");
}

TEST(DraMetricsTest, FullCountUpdatesZeroAbsentTypes) {
  MetricRegistry r;
  auto m = MakeGpu(r);
  m->SetPreparedDeviceCounts({{"gpu", 3}, {"mig", 2}});
  m->SetPreparedDeviceCounts({{"mig", 1}});
  std::string page = r.Render();
  const std::string p = "nvidia_dra_prepared_devices{node=\"node-a\",driver=\"accel.example.com\","
                        "device_type=\"";
  EXPECT_EQ(Sample(page, p + "gpu\"}"), "0");
  EXPECT_EQ(Sample(page, p + "mig\"}"), "1");

  m->SetLedgerClaimCounts({{"PrepareCompleted", 5}, {"Tombstone", 2}});
  m->SetLedgerClaimCounts({{"PrepareCompleted", 4}});
  page = r.Render();
  const std::string l = "nvdra_ledger_claims{driver=\"accel.example.com\",state=\"";
  EXPECT_EQ(Sample(page, l + "PrepareCompleted\"}"), "4");
  EXPECT_EQ(Sample(page, l + "Tombstone\"}"), "0");
}

TEST(DraMetricsTest, GaugeRefreshRunsAtEachScrapeUntilCleared) {
  MetricRegistry r;
  auto m = MakeGpu(r);
  int64_t held = 0;
  int refreshes = 0;
  m->SetGaugeRefresh([&] {
    ++refreshes;
    m->SetPreparedDeviceCounts({{"gpu", held}});
  });
  const std::string p = "nvidia_dra_prepared_devices{node=\"node-a\",driver=\"accel.example.com\",device_type=\"gpu\"}";
  held = 3;
  EXPECT_EQ(Sample(r.Render(), p), "3");
  held = 1;
  EXPECT_EQ(Sample(r.Render(), p), "1");
  EXPECT_EQ(refreshes, 2);

  m->SetGaugeRefresh(nullptr);
  held = 7;
  EXPECT_EQ(Sample(r.Render(), p), "1");
  EXPECT_EQ(refreshes, 2);
  // The registry may outlive the metrics object: its hook then does nothing.
  m.reset();
  EXPECT_NE(r.Render().find("nvidia_dra_prepared_devices"), std::string::npos);
}

TEST(DraMetricsTest, ReconcileLedgerAndSliceMetrics) {
  MetricRegistry r;
  auto m = MakeGpu(r);
  m->RecordReconcileRun("success");
  m->RecordReconcileRun("success");
  m->RecordReconcileUnprepared("claim_deleted", 3);
  m->SetStaleCompletedClaims(2);
  m->SetLedgerBytes(4096);
  m->RecordSliceSync("error");
  std::string page = r.Render();
  const std::string d = "{driver=\"accel.example.com\"";
  EXPECT_EQ(Sample(page, "nvdra_reconcile_runs_total" + d + ",result=\"success\"}"), "2");
  EXPECT_EQ(Sample(page, "nvdra_reconcile_unprepared_total" + d + ",reason=\"claim_deleted\"}"), "3");
  EXPECT_EQ(Sample(page, "nvdra_stale_completed_claims" + d + "}"), "2");
  EXPECT_EQ(Sample(page, "nvdra_ledger_bytes" + d + "}"), "4096");
  EXPECT_EQ(Sample(page, "nvdra_slice_sync_total" + d + ",result=\"error\"}"), "1");
}

TEST(DraMetricsTest, ConcurrentPreparesExactTotals) {
  MetricRegistry r;
  auto m = MakeGpu(r);
  constexpr int kThreads = 6, kIters = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIters; ++i) {
        DraMetrics::InflightScope s(*m, Operation::kPrepare);
        m->ObservePrepareStep(PrepareStep::kLedgerBegin, 0.001);
        m->ObservePrepare(0.1, true);
        m->RecordPrepareError(kErrorLockAcquire);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::string page = r.Render();
  const std::string total = std::to_string(kThreads * kIters);
  const std::string l = "{driver=\"accel.example.com\",operation=\"prepare\"}";
  EXPECT_EQ(Sample(page, "nvidia_dra_requests_total" + l), total);
  EXPECT_EQ(Sample(page, "nvidia_dra_request_duration_seconds_count" + l), total);
  EXPECT_EQ(Sample(page, "nvidia_dra_requests_inflight" + l), "0");
  EXPECT_EQ(Sample(page, "nvidia_dra_node_prepare_errors_total{driver=\"accel.example.com\","
                         "error_type=\"lock_acquire\"}"),
            total);
  EXPECT_EQ(Sample(page, "nvdra_prepare_step_duration_seconds_count{driver=\"accel.example.com\","
                         "step=\"ledger_begin\"}"),
            total);
}

TEST(DraMetricsTest, AnotherKindsDeviceTypes) {
  MetricRegistry r;
  auto m = DraMetrics::Create(r, {.driver = "fabric.example.com",
                                  .node = "n",
                                  .device_types = {"channel", "daemon", "unknown"}});
  ASSERT_TRUE(m.ok());
  std::string page = r.Render();
  for (const char* t : {"channel", "daemon", "unknown"}) {
    EXPECT_EQ(Sample(page, std::string("nvidia_dra_prepared_devices{node=\"n\",driver=\"fabric."
                                       "example.com\",device_type=\"") +
                               t + "\"}"),
              "0");
  }
  EXPECT_EQ(page.find("device_type=\"gpu\""), std::string::npos);
}

TEST(DraMetricsTest, CreateErrors) {
  MetricRegistry r;
  EXPECT_EQ(DraMetrics::Create(r, {.driver = ""}).status().code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(DraMetrics::Create(r, {.driver = "a"}).ok());
  auto second = DraMetrics::Create(r, {.driver = "b"});
  EXPECT_EQ(second.status().code(), StatusCode::kAlreadyExists);
}

TEST(DraMetricsTest, RequestStepsAddUpPerOperationAndStep) {
  MetricRegistry r;
  auto m = MakeGpu(r);
  using std::chrono::microseconds;
  const RequestSteps::Clock::time_point t0{};
  RequestSteps claim(RequestStep::kEngineOther, t0);
  claim.Switch(RequestStep::kClaimGet, t0 + microseconds(250));
  claim.Switch(RequestStep::kEngineOther, t0 + microseconds(750));
  claim.Switch(RequestStep::kEngineOther, t0 + microseconds(1000));
  RequestSteps call(RequestStep::kRpcOther, t0);
  call.Switch(RequestStep::kDispatch, t0 + microseconds(100));
  call.Switch(RequestStep::kRpcOther, t0 + microseconds(1200));
  call.Exclude(RequestStep::kDispatch, microseconds(1000));
  m->AddRequestSteps(Operation::kPrepare, claim, false);
  m->AddRequestSteps(Operation::kPrepare, call, true);
  m->AddRequestSteps(Operation::kPrepare, claim, false);
  const std::string page = r.Render();
  auto seconds = [&](const std::string& op, const std::string& step) {
    std::string v = Sample(page, "nvdra_request_step_seconds_total{driver=\"accel.example.com\",operation=\"" + op +
                                     "\",step=\"" + step + "\"}");
    EXPECT_FALSE(v.empty()) << op << " " << step;
    return v.empty() ? -1.0 : std::stod(v);
  };
  EXPECT_NEAR(seconds("prepare", "claim_get"), 0.001, 1e-12);
  EXPECT_NEAR(seconds("prepare", "engine_other"), 0.001, 1e-12);
  EXPECT_NEAR(seconds("prepare", "dispatch"), 0.0001, 1e-12);
  EXPECT_NEAR(seconds("prepare", "rpc_other"), 0.0001, 1e-12);
  // Every step of both operations exists from the start, at 0.
  EXPECT_EQ(seconds("unprepare", "claim_get"), 0.0);
  EXPECT_EQ(seconds("prepare", "fdatasync_started"), 0.0);
  EXPECT_EQ(Sample(page, "nvdra_request_steps_recorded_total{driver=\"accel.example.com\",operation=\"prepare\"}"),
            "1");
  EXPECT_EQ(Sample(page, "nvdra_request_steps_recorded_total{driver=\"accel.example.com\",operation=\"unprepare\"}"),
            "0");
}

}  // namespace
}  // namespace nvdra::metrics
