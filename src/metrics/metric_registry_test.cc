#include "metrics/metric_registry.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

namespace nvdra::metrics {
namespace {

TEST(MetricRegistryTest, CounterGolden) {
  MetricRegistry r;
  auto* c = r.AddCounter("x_total", "Things done.", {"driver", "op"}).value();
  c->WithLabels({"b", "prepare"}).Inc(2);
  c->WithLabels({"a", "unprepare"}).Inc();
  c->WithLabels({"a", "prepare"}).Inc(0.5);
  EXPECT_EQ(r.Render(), "# HELP x_total Things done.\n"
                        "# TYPE x_total counter\n"
                        "x_total{driver=\"a\",op=\"prepare\"} 0.5\n"
                        "x_total{driver=\"a\",op=\"unprepare\"} 1\n"
                        "x_total{driver=\"b\",op=\"prepare\"} 2\n");
}

TEST(MetricRegistryTest, CounterNeverDecreases) {
  MetricRegistry r;
  auto* c = r.AddCounter("c_total", "h").value();
  Counter& s = c->WithLabels(LabelValues{});
  s.Inc(3);
  s.Inc(-1);
  s.Inc(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(s.Value(), 3);
}

TEST(MetricRegistryTest, GaugeGoldenWithoutLabels) {
  MetricRegistry r;
  auto* g = r.AddGauge("g", "A gauge.").value();
  Gauge& s = g->WithLabels(LabelValues{});
  s.Set(10);
  s.Dec();
  s.Add(-2.5);
  EXPECT_EQ(r.Render(), "# HELP g A gauge.\n"
                        "# TYPE g gauge\n"
                        "g 6.5\n");
}

TEST(MetricRegistryTest, UnlabelledFamilyRendersZeroBeforeFirstUse) {
  MetricRegistry r;
  ASSERT_TRUE(r.AddCounter("zero_total", "h").ok());
  EXPECT_EQ(r.Render(), "# HELP zero_total h\n# TYPE zero_total counter\nzero_total 0\n");
}

TEST(MetricRegistryTest, LabelledFamilyWithoutSeriesIsOmitted) {
  MetricRegistry r;
  ASSERT_TRUE(r.AddGauge("empty", "h", {"a"}).ok());
  EXPECT_EQ(r.Render(), "");
}

TEST(MetricRegistryTest, HistogramGolden) {
  MetricRegistry r;
  auto* h = r.AddHistogram("lat_seconds", "Latency.", {"step"}, {0.1, 1, 2.5}).value();
  Histogram& s = h->WithLabels({"cdi"});
  s.Observe(0.1);  // le is inclusive: lands in 0.1
  s.Observe(0.5);
  s.Observe(2.5);
  s.Observe(100);  // only +Inf
  EXPECT_EQ(r.Render(), "# HELP lat_seconds Latency.\n"
                        "# TYPE lat_seconds histogram\n"
                        "lat_seconds_bucket{step=\"cdi\",le=\"0.1\"} 1\n"
                        "lat_seconds_bucket{step=\"cdi\",le=\"1\"} 2\n"
                        "lat_seconds_bucket{step=\"cdi\",le=\"2.5\"} 3\n"
                        "lat_seconds_bucket{step=\"cdi\",le=\"+Inf\"} 4\n"
                        "lat_seconds_sum{step=\"cdi\"} 103.1\n"
                        "lat_seconds_count{step=\"cdi\"} 4\n");
}

TEST(MetricRegistryTest, HistogramWithoutLabelsGolden) {
  MetricRegistry r;
  ASSERT_TRUE(r.AddHistogram("h", "H.", {}, {1}).ok());
  EXPECT_EQ(r.Render(), "# HELP h H.\n# TYPE h histogram\n"
                        "h_bucket{le=\"1\"} 0\nh_bucket{le=\"+Inf\"} 0\nh_sum 0\nh_count 0\n");
}

TEST(MetricRegistryTest, EscapesLabelValuesAndHelp) {
  MetricRegistry r;
  auto* g = r.AddGauge("e", "Back\\slash and\nnewline, \"quotes\" kept.", {"v"}).value();
  g->WithLabels({"a\"b\\c\nd"}).Set(1);
  EXPECT_EQ(r.Render(), "# HELP e Back\\\\slash and\\nnewline, \"quotes\" kept.\n"
                        "# TYPE e gauge\n"
                        "e{v=\"a\\\"b\\\\c\\nd\"} 1\n");
}

TEST(MetricRegistryTest, FamiliesSortedByNameSeriesByLabels) {
  MetricRegistry r;
  auto* b = r.AddGauge("b_metric", "b", {"k"}).value();
  auto* a = r.AddCounter("a_metric_total", "a", {"k"}).value();
  b->WithLabels({"z"}).Set(1);
  b->WithLabels({"m"}).Set(2);
  a->WithLabels({"y"}).Inc();
  EXPECT_EQ(r.Render(), "# HELP a_metric_total a\n# TYPE a_metric_total counter\n"
                        "a_metric_total{k=\"y\"} 1\n"
                        "# HELP b_metric b\n# TYPE b_metric gauge\n"
                        "b_metric{k=\"m\"} 2\n"
                        "b_metric{k=\"z\"} 1\n");
}

TEST(MetricRegistryTest, FormatValue) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(12.8), "12.8");
  EXPECT_EQ(FormatValue(-3), "-3");
  EXPECT_EQ(FormatValue(0.05), "0.05");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
  // Round-trips exactly.
  EXPECT_EQ(std::stod(FormatValue(0.1 + 0.2)), 0.1 + 0.2);
}

TEST(MetricRegistryTest, RejectsBadNamesAndDuplicates) {
  MetricRegistry r;
  EXPECT_EQ(r.AddCounter("1abc", "h").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddCounter("a-b", "h").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddCounter("ok", "h", {"__reserved"}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddCounter("ok", "h", {"a", "a"}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddHistogram("hist", "h", {"le"}, {1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddHistogram("hist", "h", {}, {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddHistogram("hist", "h", {}, {1, 1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.AddHistogram("hist", "h", {}, {1, std::numeric_limits<double>::infinity()}).status().code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(r.AddCounter("ok", "h", {"a"}).ok());
  auto dup = r.AddGauge("ok", "h");
  EXPECT_EQ(dup.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(dup.status().message().find("\"ok\""), std::string::npos);
}

TEST(MetricRegistryTest, WrongLabelCountGoesToDetachedSeries) {
  MetricRegistry r;
  auto* c = r.AddCounter("c_total", "h", {"a", "b"}).value();
  c->WithLabels({"only-one"}).Inc();
  EXPECT_EQ(c->size(), 0u);
  EXPECT_EQ(r.Render(), "");
}

TEST(MetricRegistryTest, SeriesReferenceIsStable) {
  MetricRegistry r;
  auto* c = r.AddCounter("c_total", "h", {"a"}).value();
  Counter* first = &c->WithLabels({"x"});
  for (int i = 0; i < 100; ++i) c->WithLabels({std::to_string(i)});
  EXPECT_EQ(first, &c->WithLabels({"x"}));
}

TEST(MetricRegistryTest, ConcurrentUpdatesGiveExactTotals) {
  MetricRegistry r;
  auto* c = r.AddCounter("c_total", "h", {"t"}).value();
  auto* g = r.AddGauge("g", "h").value();
  auto* h = r.AddHistogram("h_seconds", "h", {}, {0.5, 1.5}).value();
  constexpr int kThreads = 8;
  constexpr int kIters = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Half the threads share one series, the others create their own
      // concurrently, so lookup-or-create races are exercised too.
      std::string label = (t % 2 == 0) ? "shared" : "own" + std::to_string(t);
      for (int i = 0; i < kIters; ++i) {
        c->WithLabels({label}).Inc();
        g->WithLabels(LabelValues{}).Inc();
        h->WithLabels(LabelValues{}).Observe(i % 2 == 0 ? 1.0 : 2.0);
      }
    });
  }
  // Scrapes concurrently with the writers must not crash or tear.
  std::thread scraper([&] {
    for (int i = 0; i < 50; ++i) EXPECT_FALSE(r.Render().empty());
  });
  for (auto& th : threads) th.join();
  scraper.join();

  EXPECT_EQ(c->WithLabels({"shared"}).Value(), kIters * (kThreads / 2));
  for (int t = 1; t < kThreads; t += 2) {
    EXPECT_EQ(c->WithLabels({"own" + std::to_string(t)}).Value(), kIters);
  }
  EXPECT_EQ(g->WithLabels(LabelValues{}).Value(), kIters * kThreads);
  Histogram::Snapshot s = h->WithLabels(LabelValues{}).Take();
  EXPECT_EQ(s.count, static_cast<uint64_t>(kIters * kThreads));
  EXPECT_EQ(s.cumulative[0], 0u);
  EXPECT_EQ(s.cumulative[1], static_cast<uint64_t>(kIters * kThreads / 2));
  EXPECT_EQ(s.sum, 1.5 * kIters * kThreads);
}

}  // namespace
}  // namespace nvdra::metrics
