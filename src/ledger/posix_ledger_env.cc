// POSIX implementation of LedgerEnv, and the deadline-bounded flock.
#include <cerrno>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "ledger/ledger_env.h"
#include "ledger/lock_wait.h"
#include "util/file_util.h"

namespace nvdra::ledger {

bool IsOutOfSpace(const Status& s) {
  for (int err : {ENOSPC, EDQUOT}) {
    if (s.message().find(ErrnoText(err)) != std::string::npos) return true;
  }
  return false;
}

namespace {

Status IoError(const std::string& what, const std::string& path, int err) {
  StatusCode code = err == EACCES || err == EPERM ? StatusCode::kPermissionDenied : StatusCode::kUnavailable;
  return Status(code, what + " " + path + ": " + ErrnoText(err));
}

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return IoError("cannot write", path, errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

class PosixAppendFile final : public AppendFile {
 public:
  PosixAppendFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PosixAppendFile() override { ::close(fd_); }
  Status Append(std::string_view data) override { return WriteAll(fd_, data, path_); }
  Result<std::string> ReadAt(uint64_t offset, size_t n) override {
    std::string out(n, '\0');
    for (;;) {
      ssize_t got = ::pread(fd_, out.data(), n, static_cast<off_t>(offset));
      if (got >= 0) {
        out.resize(static_cast<size_t>(got));
        return out;
      }
      if (errno != EINTR) return IoError("cannot read", path_, errno);
    }
  }
  Status Sync() override {
    if (::fdatasync(fd_) != 0) return IoError("cannot sync", path_, errno);
    return Status::Ok();
  }
  Status Truncate(uint64_t size) override {
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
      return IoError("cannot truncate", path_, errno);
    }
    return Status::Ok();
  }

 private:
  int fd_;
  std::string path_;
};

class PosixFileLock final : public FileLock {
 public:
  explicit PosixFileLock(int fd) : fd_(fd) {}
  ~PosixFileLock() override { ::close(fd_); }  // closing the description drops the flock

 private:
  int fd_;
};

class PosixEnv final : public LedgerEnv {
 public:
  Result<FileIdentity> Stat(const std::string& path) override {
    struct stat st {};
    FileIdentity id;
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) return id;
      return IoError("cannot stat", path, errno);
    }
    id.exists = true;
    id.device = st.st_dev;
    id.inode = st.st_ino;
    id.size = static_cast<uint64_t>(st.st_size);
    return id;
  }

  Result<std::string> ReadFrom(const std::string& path, uint64_t offset) override {
    // Non-blocking: a FIFO planted at the name must not hang the open; and
    // only a regular file is read (a device such as /dev/zero never ends).
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return IoError("cannot open", path, errno);
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return Status(StatusCode::kFailedPrecondition, "cannot read " + path + ": it is not a regular file");
    }
    std::string out;
    char buf[1 << 16];
    off_t pos = static_cast<off_t>(offset);
    for (;;) {
      ssize_t n = ::pread(fd, buf, sizeof buf, pos);
      if (n < 0) {
        if (errno == EINTR) continue;
        int err = errno;
        ::close(fd);
        return IoError("cannot read", path, err);
      }
      if (n == 0) break;
      out.append(buf, static_cast<size_t>(n));
      pos += n;
    }
    ::close(fd);
    return out;
  }

  Result<std::unique_ptr<AppendFile>> OpenAppend(const std::string& path) override {
    // Read and write: ReadAt checks bytes already appended.
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) return IoError("cannot open", path, errno);
    return std::unique_ptr<AppendFile>(new PosixAppendFile(fd, path));
  }

  Status WriteNewFile(const std::string& path, std::string_view data) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return IoError("cannot create", path, errno);
    Status s = WriteAll(fd, data, path);
    if (s.ok() && ::fsync(fd) != 0) s = IoError("cannot sync", path, errno);
    ::close(fd);
    // A full disk must not be left fuller by the bytes that did fit.
    if (!s.ok()) ::unlink(path.c_str());
    return s;
  }

  Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return IoError("cannot rename", from, errno);
    return Status::Ok();
  }

  Status SyncDir(const std::string& dir) override { return FsyncDirectory(dir); }
  Status Remove(const std::string& path) override { return RemoveFileIfExists(path); }
  Status MakeDirs(const std::string& dir) override { return MakeDirectories(dir); }

  uint64_t VolumeBytes(const std::string& dir) override {
    struct statvfs v;
    if (::statvfs(dir.c_str(), &v) != 0) return 0;
    return static_cast<uint64_t>(v.f_blocks) * static_cast<uint64_t>(v.f_frsize);
  }

  Result<std::unique_ptr<FileLock>> Lock(const std::string& path,
                                         std::chrono::steady_clock::time_point deadline) override {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
      if (errno == ELOOP) {
        return FailedPrecondition("lock file " + path +
                                  " is a symbolic link; refusing to follow it (remove it; the "
                                  "plugin creates a plain file)");
      }
      return IoError("cannot open lock file", path, errno);
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return std::unique_ptr<FileLock>(new PosixFileLock(fd));
    if (errno != EWOULDBLOCK) {
      int err = errno;
      ::close(fd);
      return IoError("cannot lock", path, err);
    }
    // Each attempt uses its own open file description, so an abandoned wait
    // can never release a lock that a later attempt holds.
    LockWaitResult waited = WaitForLock(
        fd, [](int f) { return ::flock(f, LOCK_EX); }, deadline);
    if (waited.outcome == LockWaitOutcome::kTimedOut) {
      return DeadlineExceeded("timed out waiting for the ledger lock " + path +
                              " (another plugin process holds it; is an old plugin pod stuck?)");
    }
    if (waited.outcome == LockWaitOutcome::kFailed) {
      ::close(fd);
      return IoError("cannot lock", path, waited.err);
    }
    return std::unique_ptr<FileLock>(new PosixFileLock(fd));
  }
};

}  // namespace

LedgerEnv& LedgerEnv::Posix() {
  static PosixEnv env;
  return env;
}

}  // namespace nvdra::ledger
