#include "util/status.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <sstream>

#include "util/log.h"

namespace nvdra {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

Result<int> Quarter(int x) {
  NVDRA_ASSIGN_OR_RETURN(int h, Half(x));
  return Half(h);
}

TEST(StatusTest, OkAndWrap) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = NotFound("claim x").Wrap("prepare");
  EXPECT_EQ(s.message(), "prepare: claim x");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "NotFound: prepare: claim x");
  EXPECT_TRUE(Unavailable("x").retryable());
  EXPECT_FALSE(InvalidArgument("x").retryable());
}

TEST(StatusTest, ResultPropagates) {
  EXPECT_EQ(*Quarter(8), 2);
  auto r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "odd: 3");
}

// An error path that returns Status::Ok() into a Result used to yield a
// Result whose ok() is false but whose status() is OK: callers that check
// ok() and then report status() would report success as a failure with an
// empty message. It now holds an Internal error naming the offending line.
Result<int> ForgetsItsError() { return Status::Ok(); }

TEST(StatusTest, ResultFromOkStatusIsInternalError) {
  std::ostringstream out;
  InitLoggingTo(std::make_shared<spdlog::sinks::ostream_sink_mt>(out), 0);
  Result<int> r = ForgetsItsError();
  InitLogging(0);
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(r.status().ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_EQ(r.status().message().rfind("Result built from an OK status (at status_test.cc:", 0), 0u)
      << r.status().message();
  EXPECT_NE(out.str().find("Result built from an OK status at status_test.cc:"), std::string::npos) << out.str();

  // A Result built from an error keeps that error untouched.
  Result<int> err = NotFound("claim x");
  EXPECT_EQ(err.status(), NotFound("claim x"));
}

}  // namespace
}  // namespace nvdra
