// Logging set-up. Components log through spdlog; verbosity follows the
// Kubernetes -v convention: 0 config and permanent errors, 1 (un)prepare
// confirmations, 2 no-ops, 4 debug detail, 6 every request and ledger write.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace nvdra {

// Sets the process logger: text (default) or json lines on stderr.
void InitLogging(int verbosity, const std::string& format = "text");

// The -v level set by InitLogging.
int LogVerbosity();

}  // namespace nvdra

// Logs at Kubernetes-style verbosity `v` (info level, only when -v >= v).
#define NVDRA_VLOG(v, ...)                                      \
  do {                                                          \
    if (::nvdra::LogVerbosity() >= (v)) spdlog::info(__VA_ARGS__); \
  } while (0)
