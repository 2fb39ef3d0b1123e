#include "util/request_steps.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace nvdra {
namespace {

using std::chrono::microseconds;
using std::chrono::nanoseconds;
using Clock = RequestSteps::Clock;

TEST(RequestStepsTest, ChargesEachIntervalToTheStepRunningThen) {
  const Clock::time_point t0{};
  RequestSteps steps(RequestStep::kEngineOther, t0);
  EXPECT_EQ(steps.Switch(RequestStep::kClaimGet, t0 + microseconds(10)), RequestStep::kEngineOther);
  EXPECT_EQ(steps.Switch(RequestStep::kLogging, t0 + microseconds(250)), RequestStep::kClaimGet);
  // Back to the step the log line interrupted: nested steps are exclusive.
  steps.Switch(RequestStep::kClaimGet, t0 + microseconds(260));
  steps.Switch(RequestStep::kEngineOther, t0 + microseconds(300));
  steps.Switch(RequestStep::kEngineOther, t0 + microseconds(305));
  EXPECT_EQ(steps.nanos(RequestStep::kEngineOther), nanoseconds(microseconds(15)).count());
  EXPECT_EQ(steps.nanos(RequestStep::kClaimGet), nanoseconds(microseconds(280)).count());
  EXPECT_EQ(steps.nanos(RequestStep::kLogging), nanoseconds(microseconds(10)).count());
  EXPECT_EQ(steps.nanos(RequestStep::kCdi), 0);
  EXPECT_EQ(steps.total_nanos(), nanoseconds(microseconds(305)).count());
}

TEST(RequestStepsTest, ExcludeTakesTimeAnotherRecordAccountsFor) {
  const Clock::time_point t0{};
  RequestSteps steps(RequestStep::kRpcOther, t0);
  steps.Switch(RequestStep::kDispatch, t0 + microseconds(5));
  steps.Switch(RequestStep::kRpcOther, t0 + microseconds(1005));
  steps.Exclude(RequestStep::kDispatch, microseconds(960));
  EXPECT_EQ(steps.nanos(RequestStep::kDispatch), nanoseconds(microseconds(40)).count());
  EXPECT_EQ(steps.total_nanos(), nanoseconds(microseconds(45)).count());
}

// Runs on the steady clock (what TimedStep reads) for at least `d`.
void Spend(Clock::duration d) {
  const Clock::time_point until = Clock::now() + d;
  while (Clock::now() < until) {
  }
}

TEST(RequestStepsTest, TimedStepMarksTheInstalledRecordAndRestoresTheStepBefore) {
  const Clock::time_point before = Clock::now();
  RequestSteps steps(RequestStep::kEngineOther);
  constexpr auto kInner = std::chrono::milliseconds(2);
  {
    ScopedSteps scope(&steps);
    ASSERT_EQ(CurrentRequestSteps(), &steps);
    TimedStep outer(RequestStep::kCdi);
    {
      TimedStep inner(RequestStep::kLogging);
      Spend(kInner);
      // The running step is the inner one: switching reports it.
      EXPECT_EQ(steps.Switch(RequestStep::kLogging), RequestStep::kLogging);
    }
    EXPECT_EQ(steps.Switch(RequestStep::kCdi), RequestStep::kCdi);
  }
  EXPECT_EQ(CurrentRequestSteps(), nullptr);
  EXPECT_EQ(steps.Switch(RequestStep::kEngineOther), RequestStep::kEngineOther);
  steps.Finish();
  const int64_t wall = nanoseconds(Clock::now() - before).count();
  // The time spent inside the inner step is its own, not the outer one's,
  // and no step is charged more than the record lived.
  EXPECT_GE(steps.nanos(RequestStep::kLogging), nanoseconds(kInner).count());
  EXPECT_LT(steps.nanos(RequestStep::kCdi), nanoseconds(kInner).count());
  EXPECT_LE(steps.total_nanos(), wall);
  int64_t sum = 0;
  for (size_t i = 0; i < kRequestStepCount; ++i) {
    const auto step = static_cast<RequestStep>(i);
    if (step != RequestStep::kEngineOther && step != RequestStep::kCdi && step != RequestStep::kLogging) {
      EXPECT_EQ(steps.nanos(step), 0) << RequestStepName(step) << " never ran";
    }
    sum += steps.nanos(step);
  }
  EXPECT_EQ(sum, steps.total_nanos());
}

TEST(RequestStepsTest, TimedStepWithoutARecordDoesNothing) {
  ASSERT_EQ(CurrentRequestSteps(), nullptr);
  TimedStep step(RequestStep::kClaimGet);
  EXPECT_EQ(CurrentRequestSteps(), nullptr);
}

TEST(RequestStepsTest, EveryStepHasItsOwnName) {
  std::set<std::string> names;
  for (size_t i = 0; i < kRequestStepCount; ++i) {
    std::string name(RequestStepName(static_cast<RequestStep>(i)));
    EXPECT_NE(name, "unknown");
    EXPECT_TRUE(names.insert(name).second) << name;
  }
}

}  // namespace
}  // namespace nvdra
