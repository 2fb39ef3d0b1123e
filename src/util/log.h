// Logging set-up. Components log through spdlog, in the formats Kubernetes
// operators already parse:
//   text (default), klog's header:  I1201 02:07:40.560567   22750 engine.cc:123] msg
//   json (--logging-format json), component-base's keys:
//     {"ts":1764554860.560567,"caller":"engine.cc:123","msg":"msg","v":0}
//     (error lines carry no "v", as in component-base).
// Structured lines (NVDRA_*_S: a constant message and key/value pairs, as
// klog's InfoS/ErrorS) print as klog prints them in text,
//   E1201 02:07:40.560567   22750 claim_dispatcher.cc:231] "Error preparing claim" claim="ns/name" err="..."
// and with one JSON key per pair: {...,"msg":"Error preparing claim","claim":"ns/name","err":"..."}.
// Verbosity follows upstream's documented -v levels: 0 configuration and
// permanent errors, 1 (un)prepare confirmations, 2 no-op unprepares, 4 detail
// worth having while debugging a node, 6 every kubelet request and ledger
// write, 7 health checks.
//
// Log through the NVDRA_* macros: they record the source file and line that
// both formats show. Plain spdlog::info() still works but shows "???:1", as
// klog does when it cannot tell the caller.
#pragma once

#include <spdlog/spdlog.h>

#include "util/request_steps.h"
#include "util/status.h"

#include <string>
#include <string_view>
#include <vector>

namespace nvdra {

// The most verbose level anything logs at (every liveness check). A higher
// -v, which klog takes, logs the same as this one.
inline constexpr int kMaxLogVerbosity = 7;

// Sets the process logger: format "text" (klog) or "json" lines on stderr;
// with `split_stream` (component-base's --log-{text,json}-split-stream)
// info lines go to stdout and warnings and errors to stderr.
void InitLogging(int verbosity, const std::string& format = "text", bool split_stream = false);

// The same, writing to `sink` instead of stderr (tests).
void InitLoggingTo(spdlog::sink_ptr sink, int verbosity, const std::string& format = "text");

// The -v level set by InitLogging, at most kMaxLogVerbosity.
int LogVerbosity();

// klog's --vmodule: "pattern=N,...". A pattern matches a source file's base
// name without its extension ("engine" for engine.cc), with * and ? as glob
// characters; a matching file logs up to level N even when -v is lower.
struct VModuleRule {
  std::string pattern;
  int level = 0;
};
// Errors in component-base's words: `"x" does not have the pattern=N format`.
Result<std::vector<VModuleRule>> ParseVModule(std::string_view spec);
void SetVModule(std::vector<VModuleRule> rules);

namespace log_internal {
// The -v level of the line being logged, for the json "v" key. spdlog
// formats synchronously in the calling thread, so a thread-local carries it.
inline thread_local int current_v = 0;
struct VScope {
  explicit VScope(int v) { current_v = v; }
  ~VScope() { current_v = 0; }
};
// The key/value pairs of the structured line being logged.
struct Field {
  std::string_view key;
  std::string value;
};
inline thread_local const std::vector<Field>* current_fields = nullptr;
// Whether a line of level `v` from `file` is logged (-v, then --vmodule).
bool VEnabled(int v, const char* file);
struct FieldsScope {
  explicit FieldsScope(const std::vector<Field>& f) { current_fields = &f; }
  ~FieldsScope() { current_fields = nullptr; }
};
}  // namespace log_internal

}  // namespace nvdra

// A line logged while a request is timed counts as its "logging" step
// (util/request_steps.h), its arguments' formatting included.
#define NVDRA_LOG_AT_(lvl, ...)                                                                                \
  do {                                                                                                         \
    ::nvdra::TimedStep nvdra_log_step_(::nvdra::RequestStep::kLogging);                                        \
    spdlog::log(spdlog::source_loc{__FILE__, __LINE__, static_cast<const char*>(__func__)}, lvl, __VA_ARGS__); \
  } while (0)

// Logs at Kubernetes-style verbosity `v` (info level, only when -v >= v).
#define NVDRA_VLOG(v, ...)                                \
  do {                                                    \
    if (::nvdra::log_internal::VEnabled((v), __FILE__)) { \
      ::nvdra::log_internal::VScope nvdra_vscope_(v);     \
      NVDRA_LOG_AT_(spdlog::level::info, __VA_ARGS__);    \
    }                                                     \
  } while (0)

// Always logged (V0 information, warnings, errors).
#define NVDRA_INFO(...) NVDRA_LOG_AT_(spdlog::level::info, __VA_ARGS__)
#define NVDRA_WARN(...) NVDRA_LOG_AT_(spdlog::level::warn, __VA_ARGS__)
#define NVDRA_ERROR(...) NVDRA_LOG_AT_(spdlog::level::err, __VA_ARGS__)

// Structured lines: NVDRA_ERROR_S("Error preparing claim", {"claim", ref}, {"err", msg}).
#define NVDRA_LOG_S_(lvl, msg, ...)                                             \
  do {                                                                          \
    const std::vector<::nvdra::log_internal::Field> nvdra_fields_{__VA_ARGS__}; \
    ::nvdra::log_internal::FieldsScope nvdra_fields_scope_(nvdra_fields_);      \
    NVDRA_LOG_AT_(lvl, "{}", msg);                                              \
  } while (0)
#define NVDRA_INFO_S(msg, ...) NVDRA_LOG_S_(spdlog::level::info, msg, __VA_ARGS__)
#define NVDRA_ERROR_S(msg, ...) NVDRA_LOG_S_(spdlog::level::err, msg, __VA_ARGS__)
#define NVDRA_VLOG_S(v, msg, ...)                          \
  do {                                                     \
    if (::nvdra::log_internal::VEnabled((v), __FILE__)) {  \
      ::nvdra::log_internal::VScope nvdra_vscope_(v);      \
      NVDRA_LOG_S_(spdlog::level::info, msg, __VA_ARGS__); \
    }                                                      \
  } while (0)
