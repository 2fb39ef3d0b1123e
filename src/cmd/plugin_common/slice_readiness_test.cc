#include "cmd/plugin_common/slice_readiness.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <sstream>

#include "metrics/metric_registry.h"
#include "util/log.h"

namespace nvdra::plugin {
namespace {

using namespace std::chrono_literals;

// The rendered value of one exact sample line ("name{labels}"), or "" if absent.
std::string Sample(const std::string& page, const std::string& series) {
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(series + " ")) return line.substr(series.size() + 1);
  }
  return "";
}

kube::SliceSyncResult Failed(const std::string& why) { return {.status = Unavailable(why), .published = true}; }
kube::SliceSyncResult Published() { return {.status = Status::Ok(), .published = true, .slices = 1}; }

class SliceReadinessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    InitLoggingTo(std::make_shared<spdlog::sinks::ostream_sink_mt>(log_), 0);
    auto m = metrics::DraMetrics::Create(registry_, {.driver = "gpu.nvidia.com"});
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    metrics_ = std::move(m).value();
  }
  void TearDown() override { InitLogging(0); }
  std::string Gauge() {
    return Sample(registry_.Render(), "nvdra_resource_slices_published{driver=\"gpu.nvidia.com\"}");
  }
  std::string Errors() {
    return Sample(registry_.Render(), "nvdra_slice_sync_total{driver=\"gpu.nvidia.com\",result=\"error\"}");
  }
  int ErrorLines() {
    int n = 0;
    std::istringstream in(log_.str());
    for (std::string line; std::getline(in, line);) {
      n += line[0] == 'E' && line.find("are not published") != std::string::npos;
    }
    return n;
  }
  std::ostringstream log_;
  metrics::MetricRegistry registry_;
  std::unique_ptr<metrics::DraMetrics> metrics_;
  FakeClock clock_;
};

TEST_F(SliceReadinessTest, NotReadyUntilASyncPublishes) {
  SliceReadiness r("gpu.nvidia.com", metrics_.get(), clock_);
  EXPECT_EQ(r.Ready().message(), "ResourceSlices of driver gpu.nvidia.com not yet published");
  EXPECT_EQ(Gauge(), "0");
  r.OnSliceSync({.status = Status::Ok(), .published = false});  // before discovery
  EXPECT_FALSE(r.Ready().ok());
  r.OnSliceSync(Published());
  EXPECT_TRUE(r.Ready().ok()) << r.Ready().ToString();
  EXPECT_EQ(Gauge(), "1");
}

// The API server unreachable: not ready with the reason, the gauge at 0, the
// failures counted, one Error line a minute; ready again at the first sync
// that publishes.
TEST_F(SliceReadinessTest, FailingSyncsSayWhyAtMostOnceAMinute) {
  SliceReadiness r("gpu.nvidia.com", metrics_.get(), clock_);
  for (int i = 0; i < 59; ++i) {
    r.OnSliceSync(Failed("the API server does not answer: connection refused"));
    clock_.Advance(1s);
  }
  EXPECT_EQ(r.Ready().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.Ready().message(),
            "ResourceSlices of driver gpu.nvidia.com not published: the API server does not answer: connection "
            "refused");
  EXPECT_EQ(Gauge(), "0");
  EXPECT_EQ(Errors(), "59");
  EXPECT_EQ(ErrorLines(), 1) << log_.str();
  clock_.Advance(1s);
  r.OnSliceSync(Failed("the API server is not serving requests: HTTP 503"));
  EXPECT_EQ(ErrorLines(), 2) << log_.str();
  EXPECT_NE(log_.str().find("(60 failed sync(s) in 60 s; retrying)"), std::string::npos) << log_.str();
  r.OnSliceSync(Published());
  EXPECT_TRUE(r.Ready().ok());
  EXPECT_EQ(Gauge(), "1");
  EXPECT_NE(log_.str().find("published after 60 failed sync(s)"), std::string::npos) << log_.str();
  // A new outage is reported at once, not a minute after the last line.
  r.OnSliceSync(Failed("the API server does not answer: timed out"));
  EXPECT_EQ(ErrorLines(), 3) << log_.str();
  EXPECT_EQ(Gauge(), "0");
}

}  // namespace
}  // namespace nvdra::plugin
