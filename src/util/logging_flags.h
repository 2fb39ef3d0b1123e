// component-base's logging flags beyond -v and --logging-format, which
// upstream's binaries take: one definition for the plugins and the webhook,
// so both accept and refuse the same spellings and variables.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "util/status.h"

namespace nvdra {

struct LoggingFlags {
  // -v: any level klog takes (a non-negative int32); above kMaxLogVerbosity
  // logs as much as kMaxLogVerbosity (util/log.h).
  int verbosity = 0;
  std::string logging_format = "text";
  // --vmodule (text format only), --log-flush-frequency (every line is
  // written at once here; validated), --log-{text,json}-split-stream and
  // --log-{text,json}-info-buffer-size (LoggingAlphaOptions; lines are never
  // buffered).
  std::string vmodule;
  std::string log_flush_frequency = "5s";
  bool log_text_split_stream = false;
  bool log_json_split_stream = false;
  std::string log_text_info_buffer_size = "0";
  std::string log_json_info_buffer_size = "0";

  bool SplitLogStream() const { return logging_format == "json" ? log_json_split_stream : log_text_split_stream; }
};

// -v and --v (variable V): klog's verbosity, a whole number from 0 to
// 2147483647; a negative or non-numeric level is a usage error that says so.
// `help` tells what the levels log in this program.
void AddVerbosityFlag(CLI::App& app, LoggingFlags& f, const std::string& help);

// Each flag with the variable upstream reads it from (the name in capitals,
// '-' as '_'). The split streams are switches, as Go's flag package takes a
// bool flag: "--log-text-split-stream" or "--log-text-split-stream=false".
void AddLoggingFlags(CLI::App& app, LoggingFlags& f);

// What needs no feature gate: a flush frequency that is a Go duration above
// zero, and a vmodule list (text format only).
Status ValidateLoggingFlags(const LoggingFlags& f);

// component-base's rule: the split stream and the info buffer are alpha
// options, refused unless `alpha_enabled` (the LoggingAlphaOptions gate).
Status CheckAlphaLoggingFlags(const LoggingFlags& f, bool alpha_enabled);

}  // namespace nvdra
