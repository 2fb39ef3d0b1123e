#include "util/file_util.h"

#include "util/bounded_read.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

namespace nvdra {

std::string ErrnoText(int err) { return std::strerror(err); }

std::string JoinPath(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  if (a.back() == '/') return a + (b.front() == '/' ? b.substr(1) : b);
  return a + (b.front() == '/' ? b : "/" + b);
}

namespace {

const char* FileTypeName(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

Result<std::string> ReadFileToString(const std::string& path) { return ReadRegularFile(path, kMaxReadFileBytes); }

Result<std::string> ReadRegularFile(const std::string& path, size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return NotFound("open " + path + ": " + ErrnoText(err));
    return Internal("open " + path + ": " + ErrnoText(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return Internal("stat " + path + ": " + ErrnoText(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument("refusing to read " + path + ": it is " + FileTypeName(st.st_mode) + ", not a regular file");
  }
  auto too_long = [&](const std::string& size) {
    return InvalidArgument("refusing to read " + path + ": it is " + size + " bytes long, over the limit of " +
                           std::to_string(max_bytes) + " bytes");
  };
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return too_long(std::to_string(st.st_size));
  }
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return Internal("read " + path + ": " + ErrnoText(err));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    // A file that grows while read (or a /proc file, whose size reads 0).
    if (out.size() > max_bytes) {
      ::close(fd);
      return too_long("more than " + std::to_string(max_bytes));
    }
  }
  ::close(fd);
  return out;
}

static Status WriteAll(int fd, const char* data, size_t len, const std::string& what) {
  while (len > 0) {
    ssize_t n = ::write(fd, data, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Internal("write " + what + ": " + ErrnoText(errno));
    }
    data += n;
    len -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status FsyncDirectory(const std::string& dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Internal("open directory " + dir + ": " + ErrnoText(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return Internal("fsync directory " + dir + ": " + ErrnoText(err));
  return Status::Ok();
}

Status WriteFileAtomically(const std::string& path, const std::string& content, mode_t mode, bool sync) {
  auto slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string tmp = JoinPath(dir, "." + base + ".tmp-" + std::to_string(rng() % 1000000000ULL));
  // O_EXCL|O_NOFOLLOW: never write through anything planted at the temp name.
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return Internal("create " + tmp + ": " + ErrnoText(errno));
  Status s = WriteAll(fd, content.data(), content.size(), tmp);
  if (s.ok() && ::fchmod(fd, mode) != 0) s = Internal("chmod " + tmp + ": " + ErrnoText(errno));
  if (s.ok() && sync && ::fsync(fd) != 0) s = Internal("fsync " + tmp + ": " + ErrnoText(errno));
  if (::close(fd) != 0 && s.ok()) s = Internal("close " + tmp + ": " + ErrnoText(errno));
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    s = Internal("rename " + tmp + " to " + path + ": " + ErrnoText(errno));
  }
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  if (sync) return FsyncDirectory(dir);
  return Status::Ok();
}

Status MakeDirectories(const std::string& path, mode_t mode) {
  if (path.empty()) return Status::Ok();
  std::string cur;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    cur = path.substr(0, pos);
    if (cur.empty()) continue;
    if (::mkdir(cur.c_str(), mode) != 0 && errno != EEXIST) {
      return Internal("mkdir " + cur + ": " + ErrnoText(errno));
    }
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Internal("stat " + path + ": " + ErrnoText(errno));
  if (!S_ISDIR(st.st_mode)) return FailedPrecondition(path + " exists and is not a directory");
  return Status::Ok();
}

Status RemoveFileIfExists(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return Internal("remove " + path + ": " + ErrnoText(errno));
  }
  return Status::Ok();
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

Result<std::vector<std::string>> ListDirectory(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    int err = errno;
    if (err == ENOENT) return NotFound("open directory " + dir + ": " + ErrnoText(err));
    return Internal("open directory " + dir + ": " + ErrnoText(err));
  }
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    names.push_back(std::move(n));
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace nvdra
