#include "util/run_guarded.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sstream>
#include <stdexcept>
#include <string>

namespace nvdra {
namespace {

using ::testing::HasSubstr;

TEST(RunGuardedTest, PassesResultsThrough) {
  int ran = 0;
  EXPECT_TRUE(RunGuarded("void work", [&] { ++ran; }).ok());
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(RunGuarded("status work", [] { return NotFound("x"); }), NotFound("x"));
  Result<int> r = RunGuarded("result work", [] { return Result<int>(7); });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 7);
  Result<std::string> plain = RunGuarded("plain work", [] { return std::string("v"); });
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(*plain, "v");
}

TEST(RunGuardedTest, StdExceptionBecomesInternalStatusNamingTheWork) {
  Status s = RunGuarded("the loop", []() -> void { throw std::out_of_range("stoll"); });
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("internal error in the loop"));
  EXPECT_THAT(s.message(), HasSubstr("unexpected exception: stoll"));
}

TEST(RunGuardedTest, AnyThrownValueIsCaught) {
  Result<int> r = RunGuarded("odd work", []() -> Result<int> { throw 42; });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_THAT(r.status().message(), HasSubstr("not a std::exception"));
  Result<double> d = RunGuarded("plain", []() -> double { throw std::runtime_error("boom"); });
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("boom"));
  Status st = RunGuarded("status", []() -> Status { throw std::bad_alloc(); });
  EXPECT_EQ(st.code(), StatusCode::kInternal);
}

TEST(RunGuardedTest, EscapedExceptionIsLoggedOnceAsError) {
  std::ostringstream out;
  auto previous = spdlog::default_logger();
  auto capture = std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_st>(out));
  capture->set_pattern("%l %v");
  spdlog::set_default_logger(capture);
  Status s = RunGuarded("prepare of claim ns/a:u", []() -> Status { throw std::logic_error("bad"); });
  (void)RunGuarded("quiet work", [] { return Status::Ok(); });
  spdlog::set_default_logger(previous);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(out.str(), "error " + s.message() + "\n");
}

}  // namespace
}  // namespace nvdra
