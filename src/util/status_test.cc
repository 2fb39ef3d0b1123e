#include "util/status.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace nvdra
