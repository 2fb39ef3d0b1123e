#include "util/log.h"

#include <spdlog/sinks/stdout_sinks.h>

#include <atomic>

namespace nvdra {

static std::atomic<int> g_verbosity{0};

void InitLogging(int verbosity, const std::string& format) {
  g_verbosity.store(verbosity);
  auto logger = spdlog::stderr_logger_mt("nvdra");
  if (format == "json") {
    logger->set_pattern(
        R"({"ts":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","pid":%P,"msg":"%v"})",
        spdlog::pattern_time_type::utc);
  } else {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%f %L %P] %v", spdlog::pattern_time_type::utc);
  }
  logger->set_level(verbosity >= 6 ? spdlog::level::trace
                    : verbosity >= 4 ? spdlog::level::debug
                                     : spdlog::level::info);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

int LogVerbosity() { return g_verbosity.load(); }

}  // namespace nvdra
