#include "metrics/step_timer.h"

#include <gtest/gtest.h>

namespace nvdra::metrics {
namespace {

class StepTimerTest : public ::testing::Test {
 protected:
  void SetUp() override { metrics_ = DraMetrics::Create(registry_, {.driver = "d"}).value(); }
  // The value of one sample line of the rendered page.
  std::string Line(const std::string& series) {
    std::string page = registry_.Render();
    size_t pos = page.find("\n" + series + " ");
    return pos == std::string::npos
               ? ""
               : page.substr(pos + series.size() + 2, page.find('\n', pos + 1) - pos - series.size() - 2);
  }
  MetricRegistry registry_;
  std::unique_ptr<DraMetrics> metrics_;
  FakeClock clock_;
};

TEST_F(StepTimerTest, RecordsStepOnScopeExit) {
  {
    StepTimer t(*metrics_, PrepareStep::kDevicePrepare, clock_);
    clock_.Advance(std::chrono::milliseconds(1500));
  }
  EXPECT_EQ(Line("nvdra_prepare_step_duration_seconds_sum{driver=\"d\",step=\"device_prepare\"}"), "1.5");
  EXPECT_EQ(Line("nvdra_prepare_step_duration_seconds_count{driver=\"d\",step=\"device_prepare\"}"), "1");
}

TEST_F(StepTimerTest, StopRecordsOnce) {
  StepTimer t(*metrics_, PrepareStep::kCdiWrite, clock_);
  clock_.Advance(std::chrono::milliseconds(20));
  EXPECT_DOUBLE_EQ(t.Stop(), 0.02);
  clock_.Advance(std::chrono::seconds(5));
  EXPECT_DOUBLE_EQ(t.Stop(), 0.02);
  EXPECT_EQ(Line("nvdra_prepare_step_duration_seconds_count{driver=\"d\",step=\"cdi_write\"}"), "1");
}

TEST_F(StepTimerTest, RequestTimerCountsOnlySuccess) {
  {
    bool ok = false;
    StepTimer t(*metrics_, Operation::kPrepare, ok, clock_);
    clock_.Advance(std::chrono::seconds(1));
  }
  {
    bool ok = false;
    StepTimer t(*metrics_, Operation::kPrepare, ok, clock_);
    clock_.Advance(std::chrono::seconds(2));
    ok = true;  // set late: the value at scope exit counts
  }
  EXPECT_EQ(Line("nvidia_dra_requests_total{driver=\"d\",operation=\"prepare\"}"), "1");
  EXPECT_EQ(Line("nvidia_dra_request_duration_seconds_sum{driver=\"d\",operation=\"prepare\"}"), "2");
}

}  // namespace
}  // namespace nvdra::metrics
