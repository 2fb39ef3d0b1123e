// The standard Prometheus process metrics (process_resident_memory_bytes,
// process_cpu_seconds_total, ...), read from /proc at scrape time. Upstream
// exposes them through the Go process collector, and they are how the
// plugin's memory and CPU footprint gets published.
#pragma once

#include <memory>
#include <string>

#include "metrics/metric_registry.h"
#include "util/status.h"

namespace nvdra::metrics {

struct ProcessStats {
  double cpu_seconds = 0;  // user + system
  double resident_bytes = 0;
  double virtual_bytes = 0;
  double start_time_seconds = 0;  // since the Unix epoch
  double open_fds = 0;
  double max_fds = 0;
  double threads = 0;
};

// Reads the stats of the process whose /proc directory is `proc_pid_dir`
// (e.g. "/proc/self"); `proc_dir` holds the system-wide "stat" (boot time).
// The page size and clock tick rate are parameters so tests can use fixtures.
Result<ProcessStats> ReadProcessStats(const std::string& proc_dir, const std::string& proc_pid_dir, long page_size,
                                      long ticks_per_second);

class ProcessMetrics {
 public:
  // Registers the process_* families in `registry` and a refresh hook so each
  // scrape reads fresh values. The hook holds its own copy of what it needs,
  // so the returned object may be dropped.
  static Result<std::unique_ptr<ProcessMetrics>> Create(MetricRegistry& registry, std::string proc_dir = "/proc",
                                                        std::string pid_dir = "/proc/self");
  // Reads /proc and updates the gauges; a read failure leaves the old values.
  Status Refresh();

 private:
  // Series live in the registry; paths are copied, so a Target stays valid
  // as long as the registry does.
  struct Target {
    std::string proc_dir;
    std::string pid_dir;
    long page_size = 4096;
    long ticks = 100;
    Counter* cpu = nullptr;
    Gauge* resident = nullptr;
    Gauge* virtual_mem = nullptr;
    Gauge* start = nullptr;
    Gauge* open_fds = nullptr;
    Gauge* max_fds = nullptr;
    Gauge* threads = nullptr;
  };
  static Status Refresh(const Target& t);

  ProcessMetrics() = default;
  Target t_;
};

}  // namespace nvdra::metrics
