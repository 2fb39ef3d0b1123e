#include "metrics/metric_registry.h"

#include "util/log.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

namespace nvdra::metrics {

namespace {

void AppendLabels(std::string& out, const std::vector<std::string>& names, const LabelValues& values,
                  std::string_view extra_name = {}, std::string_view extra_value = {}) {
  if (names.empty() && extra_name.empty()) return;
  out += '{';
  bool first = true;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!first) out += ',';
    first = false;
    out += names[i];
    out += "=\"";
    out += EscapeLabelValue(values[i]);
    out += '"';
  }
  if (!extra_name.empty()) {
    if (!first) out += ',';
    out += extra_name;
    out += "=\"";
    out += extra_value;  // formatted numbers need no escaping
    out += '"';
  }
  out += '}';
}

void AppendHeader(std::string& out, const Family& f, std::string_view type) {
  out += "# HELP ";
  out += f.name();
  out += ' ';
  out += EscapeHelp(f.help());
  out += "\n# TYPE ";
  out += f.name();
  out += ' ';
  out += type;
  out += '\n';
}

void AppendSample(std::string& out, std::string_view name, const std::vector<std::string>& names,
                  const LabelValues& values, double v, std::string_view extra_name = {},
                  std::string_view extra_value = {}) {
  out += name;
  AppendLabels(out, names, values, extra_name, extra_value);
  out += ' ';
  out += FormatValue(v);
  out += '\n';
}

}  // namespace

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, res.ptr);
}

std::string EscapeLabelValue(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
  return out;
}

std::string EscapeHelp(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
  return out;
}

bool IsValidMetricName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

bool IsValidLabelName(std::string_view name) {
  if (name.empty() || name.starts_with("__")) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

void Counter::Inc(double amount) {
  if (!(amount >= 0)) return;  // also rejects NaN
  value_.fetch_add(amount, std::memory_order_relaxed);
}

void Counter::RaiseTo(double total) {
  double cur = value_.load(std::memory_order_relaxed);
  while (total > cur && !value_.compare_exchange_weak(cur, total, std::memory_order_relaxed)) {
  }
}

Histogram::Histogram(const std::vector<double>& bounds)
    : bounds_(bounds), buckets_(new std::atomic<uint64_t>[bounds.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double value) {
  if (std::isnan(value)) return;
  // Prometheus buckets are inclusive upper bounds: value <= le.
  size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Take() const {
  Snapshot s;
  s.bounds = bounds_;
  s.cumulative.resize(bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    s.cumulative[i] = running;
  }
  // The count is derived from the buckets so a scrape racing an Observe still
  // shows _count equal to the +Inf bucket, as the format requires.
  s.count = running;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

template <typename T>
T& MetricFamily<T>::WithLabels(const LabelValues& values) {
  if (values.size() != label_names_.size()) {
    NVDRA_ERROR("metric {}: got {} label values for {} label names; update dropped", name_, values.size(),
                label_names_.size());
    WriterMutexLock lock(mu_);
    if (!detached_) detached_ = NewSeries();
    return *detached_;
  }
  {
    ReaderMutexLock lock(mu_);
    auto it = series_.find(values);
    if (it != series_.end()) return *it->second;
  }
  WriterMutexLock lock(mu_);
  auto& slot = series_[values];
  if (!slot) slot = NewSeries();
  return *slot;
}

template <typename T>
size_t MetricFamily<T>::size() const {
  ReaderMutexLock lock(mu_);
  return series_.size();
}

template class MetricFamily<Counter>;
template class MetricFamily<Gauge>;
template class MetricFamily<Histogram>;

void CounterFamily::Render(std::string& out) const {
  if (size() == 0) return;
  AppendHeader(out, *this, "counter");
  ForEach([&](const LabelValues& labels, const Counter& c) {
    AppendSample(out, name_, label_names_, labels, c.Value());
  });
}

void GaugeFamily::Render(std::string& out) const {
  if (size() == 0) return;
  AppendHeader(out, *this, "gauge");
  ForEach([&](const LabelValues& labels, const Gauge& g) {
    AppendSample(out, name_, label_names_, labels, g.Value());
  });
}

void HistogramFamily::Render(std::string& out) const {
  if (size() == 0) return;
  AppendHeader(out, *this, "histogram");
  const std::string bucket = name_ + "_bucket";
  const std::string sum = name_ + "_sum";
  const std::string count = name_ + "_count";
  ForEach([&](const LabelValues& labels, const Histogram& h) {
    Histogram::Snapshot s = h.Take();
    for (size_t i = 0; i < s.bounds.size(); ++i) {
      AppendSample(out, bucket, label_names_, labels, static_cast<double>(s.cumulative[i]), "le",
                   FormatValue(s.bounds[i]));
    }
    AppendSample(out, bucket, label_names_, labels, static_cast<double>(s.count), "le", "+Inf");
    AppendSample(out, sum, label_names_, labels, s.sum);
    AppendSample(out, count, label_names_, labels, static_cast<double>(s.count));
  });
}

Status MetricRegistry::CheckNew(const std::string& name, const std::vector<std::string>& label_names,
                                bool histogram) const {
  if (!IsValidMetricName(name)) {
    return InvalidArgument("metric name \"" + name +
                           "\" is not valid: use letters, digits, '_' and ':' only, not starting "
                           "with a digit");
  }
  if (families_.count(name)) return AlreadyExists("metric \"" + name + "\" is already registered");
  std::set<std::string> seen;
  for (const auto& l : label_names) {
    if (!IsValidLabelName(l)) {
      return InvalidArgument("metric \"" + name + "\": label name \"" + l +
                             "\" is not valid: use letters, digits and '_', not starting with a "
                             "digit or \"__\"");
    }
    if (histogram && l == "le") {
      return InvalidArgument("metric \"" + name + "\": a histogram cannot have a label named \"le\"");
    }
    if (!seen.insert(l).second) {
      return InvalidArgument("metric \"" + name + "\": label name \"" + l + "\" is repeated");
    }
  }
  return Status::Ok();
}

Result<CounterFamily*> MetricRegistry::AddCounter(std::string name, std::string help,
                                                  std::vector<std::string> label_names) {
  MutexLock lock(mu_);
  NVDRA_RETURN_IF_ERROR(CheckNew(name, label_names, false));
  auto f = std::make_unique<CounterFamily>(name, std::move(help), std::move(label_names));
  CounterFamily* raw = f.get();
  // A family without labels has exactly one series; create it so it renders at 0.
  if (raw->label_names().empty()) raw->WithLabels(LabelValues{});
  families_.emplace(std::move(name), std::move(f));
  return raw;
}

Result<GaugeFamily*> MetricRegistry::AddGauge(std::string name, std::string help,
                                              std::vector<std::string> label_names) {
  MutexLock lock(mu_);
  NVDRA_RETURN_IF_ERROR(CheckNew(name, label_names, false));
  auto f = std::make_unique<GaugeFamily>(name, std::move(help), std::move(label_names));
  GaugeFamily* raw = f.get();
  if (raw->label_names().empty()) raw->WithLabels(LabelValues{});
  families_.emplace(std::move(name), std::move(f));
  return raw;
}

Result<HistogramFamily*> MetricRegistry::AddHistogram(std::string name, std::string help,
                                                      std::vector<std::string> label_names,
                                                      std::vector<double> bounds) {
  MutexLock lock(mu_);
  NVDRA_RETURN_IF_ERROR(CheckNew(name, label_names, true));
  if (bounds.empty()) {
    return InvalidArgument("histogram \"" + name + "\" needs at least one bucket bound");
  }
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i])) {
      return InvalidArgument("histogram \"" + name + "\": bucket bounds must be finite (+Inf is implicit)");
    }
    if (i > 0 && !(bounds[i] > bounds[i - 1])) {
      return InvalidArgument("histogram \"" + name + "\": bucket bounds must be strictly increasing");
    }
  }
  auto f = std::make_unique<HistogramFamily>(name, std::move(help), std::move(label_names), std::move(bounds));
  HistogramFamily* raw = f.get();
  if (raw->label_names().empty()) raw->WithLabels(LabelValues{});
  families_.emplace(std::move(name), std::move(f));
  return raw;
}

void MetricRegistry::AddRefreshHook(std::function<void()> hook) {
  MutexLock lock(mu_);
  hooks_.push_back(std::move(hook));
}

std::string MetricRegistry::Render() const {
  std::vector<std::function<void()>> hooks;
  {
    MutexLock lock(mu_);
    hooks = hooks_;
  }
  // Outside the lock: a hook may be slow (file reads) and must not block
  // registration or another scrape's rendering.
  for (const auto& h : hooks) h();
  std::string out;
  MutexLock lock(mu_);
  for (const auto& [name, family] : families_) family->Render(out);
  return out;
}

}  // namespace nvdra::metrics
