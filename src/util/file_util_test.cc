#include "util/file_util.h"

#include <gtest/gtest.h>

#include "util/test_temp_dir.h"
#include <sys/stat.h>


namespace nvdra {
namespace {

class FileUtilTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path();
  }
  ::nvdra::testing::TempDir tmp_{"nvdra-file-util"};
  std::string dir_;
};

TEST_F(FileUtilTest, AtomicWriteReplacesContentAndLeavesNoTemp) {
  std::string p = JoinPath(dir_, "f.json");
  ASSERT_TRUE(WriteFileAtomically(p, "one", 0600).ok());
  ASSERT_TRUE(WriteFileAtomically(p, "two", 0644).ok());
  auto c = ReadFileToString(p);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, "two");
  struct stat st;
  ASSERT_EQ(stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  auto names = ListDirectory(dir_);
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, std::vector<std::string>{"f.json"});
}

TEST_F(FileUtilTest, ReadMissingIsNotFound) {
  auto c = ReadFileToString(JoinPath(dir_, "nope"));
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
}

TEST_F(FileUtilTest, MakeDirectoriesAndRemove) {
  std::string d = JoinPath(dir_, "a/b/c");
  ASSERT_TRUE(MakeDirectories(d).ok());
  EXPECT_TRUE(PathExists(d));
  ASSERT_TRUE(WriteFileAtomically(JoinPath(d, "x"), "1").ok());
  EXPECT_FALSE(MakeDirectories(JoinPath(d, "x")).ok());
  EXPECT_TRUE(RemoveFileIfExists(JoinPath(d, "x")).ok());
  EXPECT_TRUE(RemoveFileIfExists(JoinPath(d, "x")).ok());
  EXPECT_FALSE(PathExists(JoinPath(d, "x")));
}

TEST(JoinPathTest, Slashes) {
  EXPECT_EQ(JoinPath("/a/", "/b"), "/a/b");
  EXPECT_EQ(JoinPath("/a", "b"), "/a/b");
  EXPECT_EQ(JoinPath("", "b"), "b");
}

}  // namespace
}  // namespace nvdra
