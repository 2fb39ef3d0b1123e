#include "util/file_util.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/bounded_read.h"
#include "util/test_temp_dir.h"

namespace nvdra {
namespace {

class FileUtilTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = tmp_.path(); }
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

TEST_F(FileUtilTest, AFifoIsRefusedWithoutWaitingForAWriter) {
  std::string p = JoinPath(dir_, "ld.so.cache");
  ASSERT_EQ(::mkfifo(p.c_str(), 0644), 0);
  // No writer ever opens it: a blocking open would hang here forever.
  auto c = ReadFileToString(p);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(), "refusing to read " + p + ": it is a FIFO, not a regular file");
}

TEST_F(FileUtilTest, ADeviceBehindASymlinkAndADirectoryAreRefused) {
  std::string p = JoinPath(dir_, "spec.json");
  ASSERT_EQ(::symlink("/dev/zero", p.c_str()), 0);
  auto c = ReadFileToString(p);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "refusing to read " + p + ": it is a character device, not a regular file");
  std::string d = JoinPath(dir_, "dir.json");
  ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
  auto dc = ReadFileToString(d);
  ASSERT_FALSE(dc.ok());
  EXPECT_EQ(dc.status().message(), "refusing to read " + d + ": it is a directory, not a regular file");
}

TEST_F(FileUtilTest, AFileOverTheBoundIsRefusedBeforeItIsRead) {
  // 2 GiB, sparse: reading it would take 2 GiB of memory.
  std::string p = JoinPath(dir_, "big");
  int fd = ::open(p.c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, off_t{2} << 30), 0);
  ::close(fd);
  auto c = ReadFileToString(p);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "refusing to read " + p + ": it is 2147483648 bytes long, over the limit of " +
                                      std::to_string(kMaxReadFileBytes) + " bytes");
  ASSERT_TRUE(WriteFileAtomically(p, std::string(100, 'x')).ok());
  EXPECT_FALSE(ReadRegularFile(p, 99).ok());
  EXPECT_EQ(ReadRegularFile(p, 100)->size(), 100u);
}

TEST_F(FileUtilTest, ProcFilesWhoseSizeReadsZeroAreReadWhole) {
  auto c = ReadFileToString("/proc/self/status");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_NE(c->find("Name:"), std::string::npos);
}

}  // namespace
}  // namespace nvdra
