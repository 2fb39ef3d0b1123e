#include "util/log.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/ostream_sink.h>

#include <sstream>

namespace nvdra {
namespace {

TEST(LogTest, JsonFormatEmitsValidJsonLines) {
  InitLogging(2, "json");
  std::ostringstream out;
  auto logger = spdlog::default_logger();
  logger->sinks().push_back(std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  // A logger's formatter reaches the sinks it has when it is set: set it again.
  InitLogging(2, "json");
  spdlog::info("claim \"a\\b\"\nfailed\t{}", 7);
  logger->sinks().pop_back();
  std::string line = out.str();
  ASSERT_FALSE(line.empty());
  auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["msg"], "claim \"a\\b\"\nfailed\t7");
  EXPECT_EQ(j["level"], "info");
  EXPECT_EQ(LogVerbosity(), 2);
}

}  // namespace
}  // namespace nvdra
