// A small thread-safe Prometheus metric registry: counter, gauge and
// histogram families with label sets, rendered in the text exposition format
// 0.0.4. Updates to an existing series are lock-free (atomics) because they sit
// on the prepare path; only creating a new label combination takes a lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/mutex.h"
#include "util/status.h"

namespace nvdra::metrics {

// Label values in the order of the family's label names.
using LabelValues = std::vector<std::string>;

class Counter {
 public:
  // Negative or NaN amounts are ignored: a counter never goes down.
  void Inc(double amount = 1.0);
  // For collectors that mirror a total kept elsewhere (CPU time): moves the
  // counter up to `total`, never down.
  void RaiseTo(double total);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double amount) { value_.fetch_add(amount, std::memory_order_relaxed); }
  void Inc() { Add(1.0); }
  void Dec() { Add(-1.0); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  // `bounds` are the finite upper bounds, strictly increasing; +Inf is implicit.
  explicit Histogram(const std::vector<double>& bounds);

  void Observe(double value);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // one per bound, then one for +Inf
    double sum = 0;
    uint64_t count = 0;  // equals cumulative.back()
  };
  Snapshot Take() const;

 private:
  std::vector<double> bounds_;
  // Per-bucket (not cumulative) counts; the last slot is the +Inf bucket.
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;
  std::atomic<double> sum_{0.0};
};

enum class MetricType { kCounter, kGauge, kHistogram };

// Common part of every family: name, help, label names, rendering.
class Family {
 public:
  Family(std::string name, std::string help, std::vector<std::string> label_names)
      : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)) {}
  virtual ~Family() = default;

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  virtual MetricType type() const = 0;
  // Appends this family in text format; nothing when it has no series yet.
  virtual void Render(std::string& out) const = 0;

 protected:
  std::string name_;
  std::string help_;
  std::vector<std::string> label_names_;
};

// A family of one metric type. Series are created on first use and live as
// long as the family, so references returned by WithLabels stay valid: callers
// on hot paths look a series up once and keep the reference.
template <typename T>
class MetricFamily : public Family {
 public:
  using Family::Family;

  // A wrong number of label values is a programming error; it must not take
  // down a prepare, so it is logged and the update goes to a detached series
  // that is never rendered.
  T& WithLabels(const LabelValues& values) EXCLUDES(mu_);
  T& WithLabels(std::initializer_list<std::string_view> values) {
    return WithLabels(LabelValues(values.begin(), values.end()));
  }
  // Number of rendered series.
  size_t size() const EXCLUDES(mu_);

 protected:
  virtual std::unique_ptr<T> NewSeries() const = 0;
  // Calls fn(labels, series) in label order under the read lock.
  template <typename Fn>
  void ForEach(Fn&& fn) const EXCLUDES(mu_) {
    ReaderMutexLock lock(mu_);
    for (const auto& [labels, series] : series_) fn(labels, *series);
  }

 private:
  mutable SharedMutex mu_;
  std::map<LabelValues, std::unique_ptr<T>> series_ GUARDED_BY(mu_);
  std::unique_ptr<T> detached_ GUARDED_BY(mu_);
};

class CounterFamily final : public MetricFamily<Counter> {
 public:
  using MetricFamily::MetricFamily;
  MetricType type() const override { return MetricType::kCounter; }
  void Render(std::string& out) const override;

 protected:
  std::unique_ptr<Counter> NewSeries() const override { return std::make_unique<Counter>(); }
};

class GaugeFamily final : public MetricFamily<Gauge> {
 public:
  using MetricFamily::MetricFamily;
  MetricType type() const override { return MetricType::kGauge; }
  void Render(std::string& out) const override;

 protected:
  std::unique_ptr<Gauge> NewSeries() const override { return std::make_unique<Gauge>(); }
};

class HistogramFamily final : public MetricFamily<Histogram> {
 public:
  HistogramFamily(std::string name, std::string help, std::vector<std::string> label_names, std::vector<double> bounds)
      : MetricFamily(std::move(name), std::move(help), std::move(label_names)), bounds_(std::move(bounds)) {}
  MetricType type() const override { return MetricType::kHistogram; }
  void Render(std::string& out) const override;
  const std::vector<double>& bounds() const { return bounds_; }

 protected:
  std::unique_ptr<Histogram> NewSeries() const override { return std::make_unique<Histogram>(bounds_); }

 private:
  std::vector<double> bounds_;
};

// Owns the families. Registration validates names so a typo fails at startup
// with a clear message instead of producing an unscrapeable page.
class MetricRegistry {
 public:
  MetricRegistry() = default;
  MetricRegistry(const MetricRegistry&) = delete;
  MetricRegistry& operator=(const MetricRegistry&) = delete;

  Result<CounterFamily*> AddCounter(std::string name, std::string help, std::vector<std::string> label_names = {})
      EXCLUDES(mu_);
  Result<GaugeFamily*> AddGauge(std::string name, std::string help, std::vector<std::string> label_names = {})
      EXCLUDES(mu_);
  Result<HistogramFamily*> AddHistogram(std::string name, std::string help, std::vector<std::string> label_names,
                                        std::vector<double> bounds) EXCLUDES(mu_);

  // Runs before every Render, for metrics read from elsewhere at scrape time
  // (/proc). Hooks may run concurrently when scrapes overlap.
  void AddRefreshHook(std::function<void()> hook) EXCLUDES(mu_);

  // The whole registry in text format 0.0.4: families sorted by name, series
  // by label values. Runs the refresh hooks first.
  std::string Render() const EXCLUDES(mu_);

 private:
  Status CheckNew(const std::string& name, const std::vector<std::string>& label_names, bool histogram) const
      REQUIRES(mu_);

  mutable Mutex mu_;
  std::map<std::string, std::unique_ptr<Family>> families_ GUARDED_BY(mu_);
  std::vector<std::function<void()>> hooks_ GUARDED_BY(mu_);
};

// Content-Type of Render()'s output.
inline constexpr std::string_view kTextContentType = "text/plain; version=0.0.4; charset=utf-8";

// Text-format helpers, exposed for tests and other renderers.
std::string FormatValue(double v);                 // "+Inf", "-Inf", "NaN", else shortest round-trip form
std::string EscapeLabelValue(std::string_view v);  // backslash, double quote, newline
std::string EscapeHelp(std::string_view v);        // backslash, newline
bool IsValidMetricName(std::string_view name);
bool IsValidLabelName(std::string_view name);

}  // namespace nvdra::metrics
