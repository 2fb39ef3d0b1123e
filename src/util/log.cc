#include "util/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <ctime>
#include <iterator>
#include <mutex>
#include <string_view>

namespace nvdra {

static std::atomic<int> g_verbosity{0};
static std::atomic<bool> g_has_vmodule{false};
static std::mutex g_vmodule_mu;
static std::vector<VModuleRule> g_vmodule;  // guarded by g_vmodule_mu

namespace {

std::string_view BaseName(const char* path) {
  std::string_view p(path);
  auto slash = p.rfind('/');
  return slash == std::string_view::npos ? p : p.substr(slash + 1);
}

// klog shows "???:1" when it cannot find the caller.
void AppendCaller(const spdlog::source_loc& loc, spdlog::memory_buf_t& dest) {
  if (loc.empty()) {
    dest.append(std::string_view("???:1"));
  } else {
    dest.append(BaseName(loc.filename));
    dest.push_back(':');
    const fmt::format_int line(loc.line);
    dest.append(line.data(), line.data() + line.size());
  }
}

// Two decimal digits of 0 <= v < 100 at p.
void Put2(char* p, int v) {
  p[0] = static_cast<char>('0' + v / 10);
  p[1] = static_cast<char>('0' + v % 10);
}

// klog's text header: Lmmdd hh:mm:ss.uuuuuu <pid, width 7> file:line] msg
void AppendJsonString(std::string_view s, spdlog::memory_buf_t& dest);

class KlogFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    char severity = 'I';
    switch (msg.level) {
      case spdlog::level::warn: severity = 'W'; break;
      case spdlog::level::err: severity = 'E'; break;
      case spdlog::level::critical: severity = 'F'; break;
      default: break;
    }
    std::time_t secs = std::chrono::system_clock::to_time_t(msg.time);
    std::tm tm{};
    localtime_r(&secs, &tm);
    auto micros = std::chrono::duration_cast<std::chrono::microseconds>(msg.time.time_since_epoch()).count() % 1000000;
    // Written digit by digit: every line of the plugin pays for the header.
    char head[22];
    head[0] = severity;
    Put2(head + 1, tm.tm_mon + 1);
    Put2(head + 3, tm.tm_mday);
    head[5] = ' ';
    Put2(head + 6, tm.tm_hour);
    head[8] = ':';
    Put2(head + 9, tm.tm_min);
    head[11] = ':';
    Put2(head + 12, tm.tm_sec);
    head[14] = '.';
    for (int i = 20; i >= 15; --i, micros /= 10) head[i] = static_cast<char>('0' + micros % 10);
    head[21] = ' ';
    dest.append(head, head + sizeof(head));
    dest.append(pid_text_);
    AppendCaller(msg.source, dest);
    dest.append(std::string_view("] "));
    const std::string_view payload(msg.payload.data(), msg.payload.size());
    if (const auto* fields = log_internal::current_fields) {
      // klog's structured text: the message and each value quoted as Go's %q.
      AppendJsonString(payload, dest);
      for (const auto& f : *fields) {
        dest.push_back(' ');
        dest.append(f.key);
        dest.push_back('=');
        AppendJsonString(f.value, dest);
      }
    } else {
      dest.append(payload);
    }
    dest.push_back('\n');
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<KlogFormatter>(); }

 private:
  std::string pid_text_ = fmt::format("{:>7} ", static_cast<int>(getpid()));
};

void AppendJsonString(std::string_view s, spdlog::memory_buf_t& dest) {
  static const char* kHex = "0123456789abcdef";
  dest.push_back('"');
  for (char c : s) {
    switch (c) {
      case '"': dest.append(std::string_view("\\\"")); break;
      case '\\': dest.append(std::string_view("\\\\")); break;
      case '\n': dest.append(std::string_view("\\n")); break;
      case '\r': dest.append(std::string_view("\\r")); break;
      case '\t': dest.append(std::string_view("\\t")); break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[6] = {'\\', 'u', '0', '0', kHex[(c >> 4) & 0xf], kHex[c & 0xf]};
          dest.append(std::string_view(buf, 6));
        } else {
          dest.push_back(c);
        }
    }
  }
  dest.push_back('"');
}

// component-base's JSON format: ts (seconds since the epoch), caller, msg,
// and v on everything but errors.
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    auto micros = std::chrono::duration_cast<std::chrono::microseconds>(msg.time.time_since_epoch()).count();
    fmt::format_to(std::back_inserter(dest), R"({{"ts":{}.{:06},"caller":")", micros / 1000000, micros % 1000000);
    AppendCaller(msg.source, dest);
    dest.append(std::string_view(R"(","msg":)"));
    AppendJsonString(std::string_view(msg.payload.data(), msg.payload.size()), dest);
    if (msg.level < spdlog::level::err) {
      fmt::format_to(std::back_inserter(dest), R"(,"v":{})", log_internal::current_v);
    }
    if (const auto* fields = log_internal::current_fields) {
      for (const auto& f : *fields) {
        dest.push_back(',');
        AppendJsonString(f.key, dest);
        dest.push_back(':');
        AppendJsonString(f.value, dest);
      }
    }
    dest.append(std::string_view("}\n"));
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<JsonFormatter>(); }
};

}  // namespace

// Info lines to one sink, warnings and errors to the other.
class SplitSink final : public spdlog::sinks::sink {
 public:
  SplitSink(spdlog::sink_ptr info, spdlog::sink_ptr errors) : info_(std::move(info)), errors_(std::move(errors)) {}
  void log(const spdlog::details::log_msg& msg) override {
    (msg.level >= spdlog::level::warn ? errors_ : info_)->log(msg);
  }
  void flush() override {
    info_->flush();
    errors_->flush();
  }
  void set_pattern(const std::string& p) override {
    info_->set_pattern(p);
    errors_->set_pattern(p);
  }
  void set_formatter(std::unique_ptr<spdlog::formatter> f) override {
    info_->set_formatter(f->clone());
    errors_->set_formatter(std::move(f));
  }

 private:
  spdlog::sink_ptr info_, errors_;
};

// Go's filepath.Match for the patterns klog's --vmodule takes: * and ?.
bool GlobMatch(std::string_view pattern, std::string_view name) {
  if (pattern.empty()) return name.empty();
  if (pattern[0] == '*') {
    for (size_t i = 0; i <= name.size(); ++i) {
      if (GlobMatch(pattern.substr(1), name.substr(i))) return true;
    }
    return false;
  }
  if (name.empty()) return false;
  if (pattern[0] != '?' && pattern[0] != name[0]) return false;
  return GlobMatch(pattern.substr(1), name.substr(1));
}

void InitLoggingTo(spdlog::sink_ptr sink, int verbosity, const std::string& format) {
  g_verbosity.store(std::clamp(verbosity, 0, kMaxLogVerbosity));
  // A fresh logger with exactly one sink each time: a line is written once.
  auto logger = std::make_shared<spdlog::logger>("nvdra", std::move(sink));
  if (format == "json") {
    logger->set_formatter(std::make_unique<JsonFormatter>());
  } else {
    logger->set_formatter(std::make_unique<KlogFormatter>());
  }
  // -v gates NVDRA_VLOG; every line that passes it is written.
  logger->set_level(spdlog::level::trace);
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(std::move(logger));
}

void InitLogging(int verbosity, const std::string& format, bool split_stream) {
  spdlog::sink_ptr sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  if (split_stream) sink = std::make_shared<SplitSink>(std::make_shared<spdlog::sinks::stdout_sink_mt>(), sink);
  InitLoggingTo(std::move(sink), verbosity, format);
}

int LogVerbosity() { return g_verbosity.load(); }

Result<std::vector<VModuleRule>> ParseVModule(std::string_view spec) {
  std::vector<VModuleRule> rules;
  while (!spec.empty()) {
    size_t comma = spec.find(',');
    std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return InvalidArgument("\"" + std::string(item) + "\" does not have the pattern=N format");
    }
    VModuleRule r;
    r.pattern = std::string(item.substr(0, eq));
    std::string_view level = item.substr(eq + 1);
    auto [p, ec] = std::from_chars(level.data(), level.data() + level.size(), r.level);
    if (ec != std::errc() || p != level.data() + level.size() || r.level < 0) {
      return InvalidArgument("parsing verbosity in \"" + std::string(item) + "\": strconv.ParseUint: parsing \"" +
                             std::string(level) + "\": invalid syntax");
    }
    if (r.pattern.empty()) return InvalidArgument("vmodule: Required value: File pattern must not be empty");
    rules.push_back(std::move(r));
  }
  return rules;
}

void SetVModule(std::vector<VModuleRule> rules) {
  std::lock_guard<std::mutex> l(g_vmodule_mu);
  g_vmodule = std::move(rules);
  g_has_vmodule.store(!g_vmodule.empty());
}

bool log_internal::VEnabled(int v, const char* file) {
  if (g_verbosity.load(std::memory_order_relaxed) >= v) return true;
  if (!g_has_vmodule.load(std::memory_order_relaxed)) return false;
  std::string_view base = BaseName(file);
  base = base.substr(0, base.rfind('.'));
  std::lock_guard<std::mutex> l(g_vmodule_mu);
  for (const auto& r : g_vmodule) {
    if (GlobMatch(r.pattern, base)) return r.level >= v;
  }
  return false;
}

}  // namespace nvdra
