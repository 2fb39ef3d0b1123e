// ProcessesHolding: real files and a real character device held open by
// this test process, found through the real /proc.
#include "devices/open_files.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>

#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::devices {
namespace {

bool HasSelf(const std::vector<FileHolder>& holders) {
  return std::any_of(holders.begin(), holders.end(), [](const FileHolder& h) { return h.pid == ::getpid(); });
}

TEST(OpenFilesTest, AFileIsHeldWhileThisProcessHasItOpenAndFreeAfterClose) {
  nvdra::testing::TempDir dir;
  const std::string path = dir.path() + "/nvidia0";
  ASSERT_TRUE(WriteFileAtomically(path, "").ok());
  auto before = ProcessesHolding("/proc", path);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_FALSE(HasSelf(*before));

  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto held = ProcessesHolding("/proc", path);
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(HasSelf(*held));
  const auto self = std::find_if(held->begin(), held->end(), [](const FileHolder& h) { return h.pid == ::getpid(); });
  EXPECT_FALSE(self->command.empty());
  EXPECT_NE(DescribeHolders(*held).find(std::to_string(::getpid()) + " ("), std::string::npos);

  ::close(fd);
  auto after = ProcessesHolding("/proc", path);
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(HasSelf(*after));
}

// A proc root is a path the operator gives (--host-root): a process
// directory whose name is digits past int's range is skipped, not parsed
// into an exception; a plain one beside it is still found.
TEST(OpenFilesTest, APidNamePastIntsRangeIsSkipped) {
  nvdra::testing::TempDir dir;
  const std::string path = dir.path() + "/nvidia0";
  ASSERT_TRUE(WriteFileAtomically(path, "").ok());
  for (const std::string pid : {"99999999999999999999999", "4294967296", "42"}) {
    const std::string fd_dir = dir.path() + "/proc/" + pid + "/fd";
    ASSERT_TRUE(MakeDirectories(fd_dir, 0755).ok());
    ASSERT_EQ(::symlink(path.c_str(), (fd_dir + "/3").c_str()), 0);
  }
  auto held = ProcessesHolding(dir.path() + "/proc", path);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  ASSERT_EQ(held->size(), 1u);
  EXPECT_EQ(held->front().pid, 42);
}

TEST(OpenFilesTest, AnotherFileWithTheSameContentIsNotTheFile) {
  nvdra::testing::TempDir dir;
  ASSERT_TRUE(WriteFileAtomically(dir.path() + "/a", "x").ok());
  ASSERT_TRUE(WriteFileAtomically(dir.path() + "/b", "x").ok());
  const int fd = ::open((dir.path() + "/b").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto held = ProcessesHolding("/proc", dir.path() + "/a");
  ::close(fd);
  ASSERT_TRUE(held.ok());
  EXPECT_FALSE(HasSelf(*held));
}

TEST(OpenFilesTest, ACharacterDeviceMatchesByDeviceNumberThroughAnyNode) {
  // /dev/null opened here; asked through a second node with the same
  // numbers, as a container's own /dev would have it.
  nvdra::testing::TempDir dir;
  const std::string twin = dir.path() + "/null-twin";
  if (::mknod(twin.c_str(), S_IFCHR | 0600, makedev(1, 3)) != 0) GTEST_SKIP() << "mknod needs CAP_MKNOD";
  const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto held = ProcessesHolding("/proc", twin);
  ::close(fd);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  EXPECT_TRUE(HasSelf(*held));
}

TEST(OpenFilesTest, AMissingFileIsNotFoundAndAMissingProcIsAnError) {
  nvdra::testing::TempDir dir;
  EXPECT_EQ(ProcessesHolding("/proc", dir.path() + "/none").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(WriteFileAtomically(dir.path() + "/f", "").ok());
  auto r = ProcessesHolding(dir.path() + "/no-proc", dir.path() + "/f");
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no-proc"), std::string::npos);
}

}  // namespace
}  // namespace nvdra::devices
