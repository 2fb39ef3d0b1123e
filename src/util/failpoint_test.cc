#include "util/failpoint.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

namespace nvdra {
namespace {

TEST(FailPointsTest, UnarmedPointIsOkAndCounted) {
  FailPoints fp;
  EXPECT_TRUE(fp.Hit("x").ok());
  EXPECT_TRUE(fp.Hit("x").ok());
  EXPECT_EQ(fp.HitCount("x"), 2);
}

TEST(FailPointsTest, ErrorActionReturnsInternal) {
  FailPoints fp;
  ASSERT_TRUE(fp.Load("a=error; b=delay(1)").ok());
  Status s = fp.Hit("a");
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("failpoint a fired"), std::string::npos);
  EXPECT_TRUE(fp.Hit("b").ok());
  EXPECT_TRUE(fp.Hit("c").ok());
}

TEST(FailPointsTest, NthHitOnly) {
  FailPoints fp;
  ASSERT_TRUE(fp.Load("a=error*2").ok());
  EXPECT_TRUE(fp.Hit("a").ok());
  EXPECT_FALSE(fp.Hit("a").ok());
  EXPECT_TRUE(fp.Hit("a").ok());
}

TEST(FailPointsTest, RejectsBadSpecs) {
  FailPoints fp;
  EXPECT_FALSE(fp.Load("noequals").ok());
  EXPECT_FALSE(fp.Load("a=explode").ok());
  EXPECT_FALSE(fp.Load("a=delay(x)").ok());
  EXPECT_FALSE(fp.Load("a=crash*0").ok());
  // Beyond int: refused, not wrapped around.
  EXPECT_FALSE(fp.Load("a=crash*99999999999").ok());
  EXPECT_FALSE(fp.Load("a=delay(99999999999)").ok());
}

TEST(FailPointsTest, OffDisarms) {
  FailPoints fp;
  ASSERT_TRUE(fp.Load("a=error").ok());
  EXPECT_TRUE(fp.Armed("a"));
  ASSERT_TRUE(fp.Load("a=off").ok());
  EXPECT_FALSE(fp.Armed("a"));
  EXPECT_TRUE(fp.Hit("a").ok());
}

TEST(FailPointsTest, PassArmsAPointAndDoesNothing) {
  FailPoints fp;
  EXPECT_FALSE(fp.Armed("a"));
  ASSERT_TRUE(fp.Load("a=pass").ok());
  EXPECT_TRUE(fp.Armed("a"));
  EXPECT_FALSE(fp.Armed("b"));
  EXPECT_TRUE(fp.Hit("a").ok());
  EXPECT_TRUE(fp.Hit("a").ok());
  EXPECT_EQ(fp.HitCount("a"), 2);
  fp.Clear();
  EXPECT_FALSE(fp.Armed("a"));
}

TEST(FailPointsTest, CrashKillsTheProcessWithSigkill) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    FailPoints fp;
    if (!fp.Load("boom=crash").ok()) _exit(3);
    (void)fp.Hit("boom");
    _exit(0);  // not reached
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

}  // namespace
}  // namespace nvdra
