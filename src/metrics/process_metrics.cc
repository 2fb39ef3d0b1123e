#include "metrics/process_metrics.h"

#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <vector>

#include "util/file_util.h"
#include "util/parse_number.h"

namespace nvdra::metrics {

namespace {

Result<std::string> Read(const std::string& path) {
  auto r = ReadFileToString(path);
  if (!r.ok()) return r.status().Wrap("reading process stats");
  return r;
}

}  // namespace

Result<ProcessStats> ReadProcessStats(const std::string& proc_dir, const std::string& pid_dir, long page_size,
                                      long ticks_per_second) {
  ProcessStats s;
  NVDRA_ASSIGN_OR_RETURN(std::string stat, Read(pid_dir + "/stat"));
  // The command name (field 2) is in parentheses and may contain spaces or
  // parentheses itself, so fields are counted from the last ')'.
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return DataLoss(pid_dir + "/stat: no command name field");
  std::istringstream in(stat.substr(close + 1));
  std::vector<std::string> f;
  for (std::string tok; in >> tok;) f.push_back(tok);
  // f[0] is field 3 (state); field N is f[N - 3].
  if (f.size() < 22) return DataLoss(pid_dir + "/stat: too few fields");
  const std::string bad_field = pid_dir + "/stat: a field is not a number";
  auto num = [&](size_t field) { return ParseDouble(f[field - 3]); };
  Result<double> utime = num(14), stime = num(15), threads = num(20), start_ticks = num(22), vsize = num(23),
                 rss = num(24);
  for (const Result<double>* r : {&utime, &stime, &threads, &start_ticks, &vsize, &rss}) {
    if (!r->ok()) return DataLoss(bad_field);
  }
  s.cpu_seconds = (*utime + *stime) / static_cast<double>(ticks_per_second);
  s.threads = *threads;
  s.virtual_bytes = *vsize;
  s.resident_bytes = *rss * static_cast<double>(page_size);

  NVDRA_ASSIGN_OR_RETURN(std::string sys, Read(proc_dir + "/stat"));
  std::istringstream lines(sys);
  double btime = -1;
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("btime ")) continue;
    Result<double> b = ParseDouble(TrimSpace(std::string_view(line).substr(6)));
    if (!b.ok()) return DataLoss(proc_dir + "/stat: btime is not a number");
    btime = *b;
  }
  if (btime < 0) return DataLoss(proc_dir + "/stat: no btime line");
  s.start_time_seconds = btime + *start_ticks / static_cast<double>(ticks_per_second);

  NVDRA_ASSIGN_OR_RETURN(std::string limits, Read(pid_dir + "/limits"));
  std::istringstream ll(limits);
  for (std::string line; std::getline(ll, line);) {
    if (line.starts_with("Max open files")) {
      std::istringstream v(line.substr(std::string_view("Max open files").size()));
      std::string soft;
      v >> soft;
      // "unlimited" has no number; leave 0 as the Go collector does on errors.
      if (!soft.empty() && soft != "unlimited") {
        Result<double> n = ParseDouble(soft);
        if (!n.ok()) return DataLoss(pid_dir + "/limits: max open files is not a number");
        s.max_fds = *n;
      }
    }
  }

  std::error_code ec;
  double fds = 0;
  for (auto it = std::filesystem::directory_iterator(pid_dir + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++fds;
  }
  if (ec) return Unavailable("listing " + pid_dir + "/fd: " + ec.message());
  s.open_fds = fds;
  return s;
}

Result<std::unique_ptr<ProcessMetrics>> ProcessMetrics::Create(MetricRegistry& registry, std::string proc_dir,
                                                               std::string pid_dir) {
  std::unique_ptr<ProcessMetrics> m(new ProcessMetrics());
  Target& t = m->t_;
  t.proc_dir = std::move(proc_dir);
  t.pid_dir = std::move(pid_dir);
  t.page_size = sysconf(_SC_PAGESIZE);
  t.ticks = sysconf(_SC_CLK_TCK);
  if (t.page_size <= 0) t.page_size = 4096;
  if (t.ticks <= 0) t.ticks = 100;

  auto gauge = [&](const char* name, const char* help) -> Result<Gauge*> {
    NVDRA_ASSIGN_OR_RETURN(GaugeFamily * f, registry.AddGauge(name, help));
    return &f->WithLabels(LabelValues{});
  };
  NVDRA_ASSIGN_OR_RETURN(CounterFamily * cpu, registry.AddCounter("process_cpu_seconds_total",
                                                                  "Total user and system CPU time spent in seconds."));
  t.cpu = &cpu->WithLabels(LabelValues{});
  NVDRA_ASSIGN_OR_RETURN(t.resident, gauge("process_resident_memory_bytes", "Resident memory size in bytes."));
  NVDRA_ASSIGN_OR_RETURN(t.virtual_mem, gauge("process_virtual_memory_bytes", "Virtual memory size in bytes."));
  NVDRA_ASSIGN_OR_RETURN(t.start,
                         gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds."));
  NVDRA_ASSIGN_OR_RETURN(t.open_fds, gauge("process_open_fds", "Number of open file descriptors."));
  NVDRA_ASSIGN_OR_RETURN(t.max_fds, gauge("process_max_fds", "Maximum number of open file descriptors."));
  NVDRA_ASSIGN_OR_RETURN(t.threads, gauge("process_threads", "Number of OS threads."));
  registry.AddRefreshHook([t = m->t_] { (void)Refresh(t); });
  return m;
}

Status ProcessMetrics::Refresh() { return Refresh(t_); }

Status ProcessMetrics::Refresh(const Target& t) {
  NVDRA_ASSIGN_OR_RETURN(ProcessStats s, ReadProcessStats(t.proc_dir, t.pid_dir, t.page_size, t.ticks));
  t.cpu->RaiseTo(s.cpu_seconds);
  t.resident->Set(s.resident_bytes);
  t.virtual_mem->Set(s.virtual_bytes);
  t.start->Set(s.start_time_seconds);
  t.open_fds->Set(s.open_fds);
  t.max_fds->Set(s.max_fds);
  t.threads->Set(s.threads);
  return Status::Ok();
}

}  // namespace nvdra::metrics
