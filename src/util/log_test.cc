#include "util/log.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <unistd.h>

#include <regex>
#include <sstream>

namespace nvdra {
namespace {

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

class LogTest : public ::testing::Test {
 protected:
  void Init(int v, const std::string& format) {
    InitLoggingTo(std::make_shared<spdlog::sinks::ostream_sink_mt>(out_), v, format);
  }
  void TearDown() override { InitLogging(0); }
  std::ostringstream out_;
};

TEST_F(LogTest, TextIsKlogHeaderWithCallerAndOneLinePerCall) {
  Init(2, "text");
  int line = __LINE__ + 1;
  NVDRA_INFO("prepared {} devices", 3);
  NVDRA_WARN("slow");
  NVDRA_ERROR("broken");
  NVDRA_VLOG(2, "shown at v2");
  NVDRA_VLOG(3, "hidden at v2");
  auto lines = Lines(out_.str());
  ASSERT_EQ(lines.size(), 4u) << out_.str();
  // I1201 02:07:40.560567   22750 log_test.cc:123] msg
  std::regex header(R"(^([IWEF])(\d{4}) (\d\d:\d\d:\d\d\.\d{6}) ( *\d+) log_test\.cc:(\d+)\] (.*)$)");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(lines[0], m, header)) << lines[0];
  EXPECT_EQ(m[1], "I");
  EXPECT_EQ(m[4].length(), 7);  // pid right-aligned in 7 columns, as klog
  EXPECT_EQ(std::stoi(m[4]), static_cast<int>(getpid()));
  EXPECT_EQ(std::stoi(m[5]), line);
  EXPECT_EQ(m[6], "prepared 3 devices");
  ASSERT_TRUE(std::regex_match(lines[1], m, header)) << lines[1];
  EXPECT_EQ(m[1], "W");
  ASSERT_TRUE(std::regex_match(lines[2], m, header)) << lines[2];
  EXPECT_EQ(m[1], "E");
  EXPECT_NE(lines[3].find("] shown at v2"), std::string::npos);
}

TEST_F(LogTest, CallerUnknownShowsKlogPlaceholder) {
  Init(0, "text");
  spdlog::info("no caller");
  EXPECT_NE(out_.str().find(" ???:1] no caller"), std::string::npos) << out_.str();
}

TEST_F(LogTest, JsonHasComponentBaseKeys) {
  Init(6, "json");
  int line = __LINE__ + 1;
  NVDRA_VLOG(6, "claim \"a\\b\"\nfailed\t{}", 7);
  NVDRA_ERROR("permanent");
  NVDRA_INFO("plain");
  auto lines = Lines(out_.str());
  ASSERT_EQ(lines.size(), 3u) << out_.str();
  auto j = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(j["msg"], "claim \"a\\b\"\nfailed\t7");
  EXPECT_EQ(j["caller"], "log_test.cc:" + std::to_string(line));
  EXPECT_EQ(j["v"], 6);
  ASSERT_TRUE(j["ts"].is_number_float());
  EXPECT_NEAR(j["ts"].get<double>(), static_cast<double>(time(nullptr)), 5.0);
  std::set<std::string> keys;
  for (auto& [k, unused] : j.items()) keys.insert(k);
  EXPECT_EQ(keys, (std::set<std::string>{"ts", "caller", "msg", "v"}));
  auto e = nlohmann::json::parse(lines[1]);
  EXPECT_FALSE(e.contains("v")) << lines[1];  // component-base: errors carry no v
  EXPECT_EQ(e["msg"], "permanent");
  auto i = nlohmann::json::parse(lines[2]);
  EXPECT_EQ(i["v"], 0);  // the v of one VLOG line does not leak into the next
  EXPECT_EQ(LogVerbosity(), 6);
}

// klog takes any level; one above ours logs what our most verbose level logs.
TEST_F(LogTest, LevelsAboveTheMostVerboseLogAsIt) {
  Init(20, "text");
  EXPECT_EQ(LogVerbosity(), kMaxLogVerbosity);
  NVDRA_VLOG(kMaxLogVerbosity, "every health check");
  EXPECT_NE(out_.str().find("every health check"), std::string::npos) << out_.str();
}

TEST_F(LogTest, StructuredLinesQuoteTheMessageAndEachValueInTextAndGetOwnKeysInJson) {
  Init(4, "text");
  NVDRA_ERROR_S("Error preparing claim", {"claim", "default/a"}, {"err", "gpu-0 \"held\"\nby b"});
  NVDRA_VLOG_S(4, "Prepared claim", {"claim", "default/a"});
  NVDRA_VLOG_S(5, "hidden", {"claim", "default/a"});
  NVDRA_INFO("plain after");
  auto lines = Lines(out_.str());
  ASSERT_EQ(lines.size(), 3u) << out_.str();
  EXPECT_EQ(lines[0].substr(0, 1), "E");
  EXPECT_EQ(lines[0].substr(lines[0].find("] ")),
            R"(] "Error preparing claim" claim="default/a" err="gpu-0 \"held\"\nby b")");
  EXPECT_EQ(lines[1].substr(lines[1].find("] ")), R"(] "Prepared claim" claim="default/a")");
  EXPECT_EQ(lines[2].substr(lines[2].find("] ")), "] plain after") << "the fields do not leak into the next line";

  out_.str("");
  Init(4, "json");
  NVDRA_ERROR_S("Error preparing claim", {"claim", "default/a"}, {"uid", "u-1"}, {"err", "held"});
  NVDRA_VLOG_S(4, "Prepared claim", {"claim", "default/a"});
  lines = Lines(out_.str());
  ASSERT_EQ(lines.size(), 2u) << out_.str();
  auto e = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(e["msg"], "Error preparing claim");
  EXPECT_EQ(e["claim"], "default/a");
  EXPECT_EQ(e["uid"], "u-1");
  EXPECT_EQ(e["err"], "held");
  EXPECT_FALSE(e.contains("v"));
  auto i = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(i["v"], 4);
  EXPECT_EQ(i["claim"], "default/a");
}

TEST_F(LogTest, ReinitialisingDoesNotDuplicateLines) {
  Init(0, "text");
  Init(0, "text");
  NVDRA_INFO("once");
  EXPECT_EQ(Lines(out_.str()).size(), 1u) << out_.str();
}

}  // namespace
}  // namespace nvdra
