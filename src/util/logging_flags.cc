#include "util/logging_flags.h"

#include <regex>
#include <utility>

#include "util/log.h"
#include "util/parse_number.h"

namespace nvdra {

void AddVerbosityFlag(CLI::App& app, LoggingFlags& f, const std::string& help) {
  // klog's Level is an int32 and takes any level: a manifest written for a
  // Go component (-v=10, -v 20) must start here too. The check runs on the
  // text, before CLI11 converts it, so its words are the ones the user sees.
  CLI::Validator level(
      [](std::string& text) -> std::string {
        auto v = ParseInt32(text);
        if (v.ok() && *v >= 0) return "";
        return "\"" + text + "\" is not a log verbosity: expected a whole number from 0 to 2147483647 (" +
               std::to_string(kMaxLogVerbosity) + " and above log everything)";
      },
      "LEVEL");
  app.add_option("-v,--v", f.verbosity, help)->envname("V")->check(level);
}

void AddLoggingFlags(CLI::App& app, LoggingFlags& f) {
  app.add_option("--vmodule", f.vmodule,
                 "Comma-separated pattern=N settings for file-filtered logging (text format only)")
      ->envname("VMODULE");
  app.add_option("--log-flush-frequency", f.log_flush_frequency,
                 "Maximum seconds between log flushes (every line is written at once)")
      ->envname("LOG_FLUSH_FREQUENCY")
      ->capture_default_str();
  app.add_flag("--log-text-split-stream", f.log_text_split_stream,
               "[Alpha] In text format, info lines to stdout and errors to stderr (LoggingAlphaOptions)")
      ->envname("LOG_TEXT_SPLIT_STREAM");
  app.add_flag("--log-json-split-stream", f.log_json_split_stream,
               "[Alpha] In JSON format, info lines to stdout and errors to stderr (LoggingAlphaOptions)")
      ->envname("LOG_JSON_SPLIT_STREAM");
  app.add_option("--log-text-info-buffer-size", f.log_text_info_buffer_size,
                 "[Alpha] Accepted for compatibility (LoggingAlphaOptions); lines are never buffered")
      ->envname("LOG_TEXT_INFO_BUFFER_SIZE");
  app.add_option("--log-json-info-buffer-size", f.log_json_info_buffer_size,
                 "[Alpha] Accepted for compatibility (LoggingAlphaOptions); lines are never buffered")
      ->envname("LOG_JSON_INFO_BUFFER_SIZE");
}

Status ValidateLoggingFlags(const LoggingFlags& f) {
  // A Go duration ("5s", "1m30s", "250ms"), greater than zero.
  static const std::regex kDuration(
      R"(^([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h)(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h))*$)");
  if (f.log_flush_frequency.size() > 64 || !std::regex_match(f.log_flush_frequency, kDuration) ||
      f.log_flush_frequency.find_first_of("123456789") == std::string::npos) {
    return InvalidArgument("--log-flush-frequency: Invalid value: \"" + f.log_flush_frequency +
                           "\": Must be greater than zero");
  }
  if (!f.vmodule.empty()) {
    if (f.logging_format != "text") return InvalidArgument("vmodule: Forbidden: Only supported for text log format");
    NVDRA_RETURN_IF_ERROR(ParseVModule(f.vmodule).status().Wrap("--vmodule"));
  }
  return Status::Ok();
}

Status CheckAlphaLoggingFlags(const LoggingFlags& f, bool alpha_enabled) {
  if (alpha_enabled) return Status::Ok();
  const std::pair<const char*, bool> alpha[] = {
      {"--log-text-split-stream", f.log_text_split_stream},
      {"--log-json-split-stream", f.log_json_split_stream},
      {"--log-text-info-buffer-size", f.log_text_info_buffer_size != "0" && !f.log_text_info_buffer_size.empty()},
      {"--log-json-info-buffer-size", f.log_json_info_buffer_size != "0" && !f.log_json_info_buffer_size.empty()},
  };
  for (const auto& [flag, set] : alpha) {
    if (set) return InvalidArgument(std::string(flag) + ": Forbidden: Feature LoggingAlphaOptions is disabled");
  }
  return Status::Ok();
}

}  // namespace nvdra
