#include "util/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <atomic>

namespace nvdra {

static std::atomic<int> g_verbosity{0};

namespace {

// %j: the message as a JSON string body (quotes, backslashes and control
// characters escaped), so --logging-format=json emits valid JSON lines.
class JsonMessageFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    static const char* kHex = "0123456789abcdef";
    for (char c : std::string_view(msg.payload.data(), msg.payload.size())) {
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
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<JsonMessageFlag>(); }
};

}  // namespace

void InitLogging(int verbosity, const std::string& format) {
  g_verbosity.store(verbosity);
  auto logger = spdlog::get("nvdra");
  if (!logger) logger = spdlog::stderr_logger_mt("nvdra");
  if (format == "json") {
    auto f = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
    f->add_flag<JsonMessageFlag>('j').set_pattern(
        R"({"ts":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","pid":%P,"msg":"%j"})");
    logger->set_formatter(std::move(f));
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
