#include "kubelet/socket_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "kubelet/test_util.h"
#include "util/file_util.h"

namespace nvdra::kubelet {
namespace {

using ::testing::HasSubstr;

// Binds a listening Unix socket at `path`; returns its fd.
int Listen(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
  EXPECT_EQ(::listen(fd, 4), 0);
  return fd;
}

ino_t Inode(const std::string& path) {
  struct stat st {};
  ::lstat(path.c_str(), &st);
  return st.st_ino;
}

TEST(SocketFileTest, PublishReplacesStaleSocketAndRemovesOnlyOurs) {
  ::nvdra::testing::TempDir dir{testing::kShortTempPrefix};
  const std::string path = dir.path() + "/sub/dra.sock";
  ASSERT_TRUE(MakeDirectories(dir.path() + "/sub").ok());
  ::close(Listen(path));  // a stale socket file: nobody listens any more
  auto sock = SocketFile::Prepare(path);
  ASSERT_TRUE(sock.ok()) << sock.status().ToString();
  EXPECT_NE(sock->bind_path(), path);
  EXPECT_EQ(sock->bind_path().rfind(dir.path() + "/sub/.dra.sock.", 0), 0u);
  EXPECT_FALSE(sock->StillOurs());
  int fd = Listen(sock->bind_path());
  ASSERT_TRUE(sock->Publish().ok());
  EXPECT_FALSE(PathExists(sock->bind_path()));
  EXPECT_TRUE(sock->StillOurs());
  ASSERT_TRUE(sock->RemoveIfOurs().ok());
  EXPECT_FALSE(PathExists(path));
  ::close(fd);
}

TEST(SocketFileTest, RefusesASocketThatStillAnswers) {
  ::nvdra::testing::TempDir dir{testing::kShortTempPrefix};
  const std::string path = dir.path() + "/reg.sock";
  auto mine = SocketFile::Prepare(path);
  ASSERT_TRUE(mine.ok());
  int fd1 = Listen(mine->bind_path());
  ASSERT_TRUE(mine->Publish().ok());
  EXPECT_TRUE(SocketAnswers(path));
  auto theirs = SocketFile::Prepare(path);
  ASSERT_FALSE(theirs.ok());
  EXPECT_EQ(theirs.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(theirs.status().message(), HasSubstr("served by another running plugin instance"));
  EXPECT_TRUE(mine->StillOurs());
  ::close(fd1);
  EXPECT_FALSE(SocketAnswers(path));
}

TEST(SocketFileTest, LeavesAnotherInstancesSocketAlone) {
  ::nvdra::testing::TempDir dir{testing::kShortTempPrefix};
  const std::string path = dir.path() + "/reg.sock";
  auto mine = SocketFile::Prepare(path);
  ASSERT_TRUE(mine.ok());
  int fd1 = Listen(mine->bind_path());
  ASSERT_TRUE(mine->Publish().ok());
  ::close(fd1);                             // this instance stopped answering (hung or dying)...
  auto theirs = SocketFile::Prepare(path);  // ...so a new one may take the name
  ASSERT_TRUE(theirs.ok()) << theirs.status().ToString();
  int fd2 = Listen(theirs->bind_path());
  ASSERT_TRUE(theirs->Publish().ok());
  const ino_t their_inode = Inode(path);
  EXPECT_FALSE(mine->StillOurs());
  ASSERT_TRUE(mine->RemoveIfOurs().ok());
  EXPECT_TRUE(PathExists(path));
  EXPECT_EQ(Inode(path), their_inode);
  EXPECT_TRUE(theirs->StillOurs());
  ::close(fd2);
}

TEST(SocketFileTest, PublishedSocketHasItsModeWhateverTheUmask) {
  ::nvdra::testing::TempDir dir{testing::kShortTempPrefix};
  const std::string path = dir.path() + "/dra.sock";
  auto sock = SocketFile::Prepare(path);
  ASSERT_TRUE(sock.ok());
  mode_t old_umask = ::umask(0);
  int fd = Listen(sock->bind_path());
  ::umask(old_umask);
  ASSERT_TRUE(sock->Publish().ok());
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, kSocketMode);
  ::close(fd);
}

TEST(SocketFileTest, RefusesNonSocketsAndOverlongPaths) {
  ::nvdra::testing::TempDir dir{testing::kShortTempPrefix};
  const std::string file = dir.path() + "/dra.sock";
  ASSERT_TRUE(WriteFileAtomically(file, "not a socket", 0644, false).ok());
  auto r = SocketFile::Prepare(file);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("is not a socket"));
  auto longp = SocketFile::Prepare(dir.path() + "/" + std::string(90, 'x') + ".sock");
  ASSERT_FALSE(longp.ok());
  EXPECT_THAT(longp.status().message(), HasSubstr("too long"));
  EXPECT_FALSE(SocketFile::Prepare("relative/dra.sock").ok());
}

TEST(SocketFileTest, PodUidNamesThatFitGetAShortPrivateName) {
  ::nvdra::testing::TempDir dir{testing::kShortTempPrefix};
  // As in a DaemonSet with --rolling-update-id set to the pod UID: the name
  // fits, the name with ".<name>.<pid>-<nonce>" would not.
  std::string name = "compute-domain.nvidia.com-0b6e4a5c-1f2d-4c3b-9a8e-0123456789ab-reg.sock";
  std::string path = dir.path() + "/";
  path += std::string(kMaxSocketPathLength - 3 - path.size() - name.size(), 'r') + "/" + name;
  ASSERT_LE(path.size(), kMaxSocketPathLength);
  ASSERT_GT(path.size() + 12, kMaxSocketPathLength);
  auto sock = SocketFile::Prepare(path);
  ASSERT_TRUE(sock.ok()) << sock.status().ToString();
  EXPECT_LE(sock->bind_path().size(), kMaxSocketPathLength);
  int fd = Listen(sock->bind_path());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(sock->Publish().ok());
  EXPECT_TRUE(PathExists(path));
  ::close(fd);
}

}  // namespace
}  // namespace nvdra::kubelet
