#include "cmd/nvdra-cdi-hook/in_root.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <deque>
#include <random>

namespace nvdra::cdihook {

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

std::system_error SysError(int err, const std::string& what) {
  return std::system_error(err, std::generic_category(), what);
}

std::vector<std::string> PathComponents(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (end > start) out.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

namespace {

// Links followed in one lookup before giving up, as the kernel's limit.
constexpr int kMaxLinks = 40;

std::string ReadLinkAt(int dir, const std::string& name) {
  std::string buf(PATH_MAX, '\0');
  ssize_t n = ::readlinkat(dir, name.c_str(), buf.data(), buf.size());
  if (n < 0) throw SysError(errno, "readlink " + name);
  buf.resize(static_cast<size_t>(n));
  return buf;
}

std::string JoinInRoot(const std::string& dir, const std::string& name) {
  if (name == ".") return dir;
  return dir == "/" ? "/" + name : dir + "/" + name;
}

std::string TempName(const std::string& base) {
  static std::mt19937_64 rng{std::random_device{}()};
  return "." + base + ".tmp-" + std::to_string(rng() % 1000000000ULL);
}

// True when nothing but "." is left: `c` is the last real component.
bool OnlyDots(const std::deque<std::string>& todo) {
  for (const auto& c : todo) {
    if (c != ".") return false;
  }
  return true;
}

}  // namespace

std::string ContainerRoot::Entry::InRootPath() const { return JoinInRoot(dir_path, name); }

ContainerRoot::ContainerRoot(const std::string& path) : path_(path) {
  fd_ = UniqueFd(::open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fd_.valid()) throw SysError(errno, "open container root " + path);
}

ContainerRoot::Entry ContainerRoot::Locate(const std::string& path, bool follow_last, bool make_parents) const {
  // The directories walked so far, root first: ".." pops one (never the
  // root) instead of opening "..", which a directory moved out of the root
  // would lead out of it.
  std::vector<UniqueFd> dirs;
  std::vector<std::string> names;
  dirs.emplace_back(::fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0));
  if (!dirs.back().valid()) throw SysError(errno, "dup container root");
  auto dir_path = [&names] {
    std::string p;
    for (const auto& n : names) p += "/" + n;
    return p.empty() ? std::string("/") : p;
  };
  auto entry_here = [&](std::string name) {
    Entry e;
    e.dir = UniqueFd(::fcntl(dirs.back().get(), F_DUPFD_CLOEXEC, 0));
    if (!e.dir.valid()) throw SysError(errno, "dup directory");
    e.dir_path = dir_path();
    e.name = std::move(name);
    return e;
  };

  auto parts = PathComponents(path);
  std::deque<std::string> todo(parts.begin(), parts.end());
  int links = 0;
  while (!todo.empty()) {
    std::string c = std::move(todo.front());
    todo.pop_front();
    if (c == ".") continue;
    if (c == "..") {
      if (dirs.size() > 1) {
        dirs.pop_back();
        names.pop_back();
      }
      continue;
    }
    const bool last = OnlyDots(todo);
    const int top = dirs.back().get();
    struct stat st;
    if (::fstatat(top, c.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT) throw SysError(errno, "stat " + JoinInRoot(dir_path(), c) + " in " + path_);
      if (last) return entry_here(c);
      if (!make_parents) throw SysError(ENOENT, JoinInRoot(dir_path(), c) + " in " + path_);
      if (::mkdirat(top, c.c_str(), 0755) != 0 && errno != EEXIST) {
        throw SysError(errno, "mkdir " + JoinInRoot(dir_path(), c) + " in " + path_);
      }
      if (::fstatat(top, c.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        throw SysError(errno, "stat " + JoinInRoot(dir_path(), c) + " in " + path_);
      }
    }
    if (S_ISLNK(st.st_mode)) {
      if (last && !follow_last) return entry_here(c);
      if (++links > kMaxLinks) throw SysError(ELOOP, path + " in " + path_);
      std::string target = ReadLinkAt(top, c);
      if (!target.empty() && target[0] == '/') {
        // Absolute: from the container's root, as the container sees it.
        dirs.resize(1);
        names.clear();
      }
      auto more = PathComponents(target);
      todo.insert(todo.begin(), more.begin(), more.end());
      continue;
    }
    if (last) return entry_here(c);
    if (!S_ISDIR(st.st_mode)) throw SysError(ENOTDIR, JoinInRoot(dir_path(), c) + " in " + path_);
    // O_NOFOLLOW: a directory swapped for a link since the stat fails here.
    UniqueFd next(::openat(top, c.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next.valid()) throw SysError(errno, "open " + JoinInRoot(dir_path(), c) + " in " + path_);
    dirs.push_back(std::move(next));
    names.push_back(std::move(c));
  }
  // The path named a directory already walked (the root, or one left
  // through ".."): hand back its parent and its name.
  if (dirs.size() == 1) return entry_here(".");
  std::string name = names.back();
  dirs.pop_back();
  names.pop_back();
  return entry_here(name);
}

std::optional<std::string> ContainerRoot::Resolve(const std::string& path) const {
  try {
    Entry e = Locate(path, true, false);
    struct stat st;
    if (::fstatat(e.dir.get(), e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) return std::nullopt;
      throw SysError(errno, "stat " + e.InRootPath() + " in " + path_);
    }
    return e.InRootPath();
  } catch (const std::system_error& err) {
    if (err.code().value() == ENOENT || err.code().value() == ENOTDIR) return std::nullopt;
    throw;
  }
}

bool ContainerRoot::Exists(const std::string& path, bool dir) const {
  try {
    Entry e = Locate(path, true, false);
    struct stat st;
    if (::fstatat(e.dir.get(), e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
    return !dir || S_ISDIR(st.st_mode);
  } catch (const std::system_error& err) {
    if (err.code().value() == ENOENT || err.code().value() == ENOTDIR) return false;
    throw;
  }
}

std::optional<std::string> ContainerRoot::ReadFile(const std::string& path) const {
  Entry e;
  try {
    e = Locate(path, true, false);
  } catch (const std::system_error& err) {
    if (err.code().value() == ENOENT || err.code().value() == ENOTDIR) return std::nullopt;
    throw;
  }
  UniqueFd fd(::openat(e.dir.get(), e.name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return std::nullopt;
    throw SysError(errno, "open " + e.InRootPath() + " in " + path_);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) throw SysError(errno, "stat " + e.InRootPath());
  if (!S_ISREG(st.st_mode)) throw SysError(EINVAL, e.InRootPath() + " in " + path_ + " is not a regular file");
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw SysError(errno, "read " + e.InRootPath() + " in " + path_);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

bool ContainerRoot::WriteFile(const std::string& path, const std::string& content, mode_t mode) const {
  Entry e = Locate(path, false, true);
  if (e.name == ".") throw SysError(EISDIR, path);
  {
    UniqueFd old(::openat(e.dir.get(), e.name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    struct stat st;
    if (old.valid() && ::fstat(old.get(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == mode &&
        static_cast<size_t>(st.st_size) == content.size()) {
      std::string have(content.size(), '\0');
      if (::pread(old.get(), have.data(), have.size(), 0) == static_cast<ssize_t>(have.size()) && have == content) {
        return false;
      }
    }
  }
  const std::string tmp = TempName(e.name);
  // O_EXCL|O_NOFOLLOW: never write through anything planted at the name.
  UniqueFd fd(::openat(e.dir.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
  if (!fd.valid()) throw SysError(errno, "create " + JoinInRoot(e.dir_path, tmp) + " in " + path_);
  auto fail = [&](const std::string& what) {
    int err = errno;
    ::unlinkat(e.dir.get(), tmp.c_str(), 0);
    return SysError(err, what + " " + e.InRootPath() + " in " + path_);
  };
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = ::write(fd.get(), content.data() + off, content.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw fail("write");
    }
    off += static_cast<size_t>(n);
  }
  if (::fchmod(fd.get(), mode) != 0) throw fail("chmod");
  if (::fsync(fd.get()) != 0) throw fail("fsync");
  if (::renameat(e.dir.get(), tmp.c_str(), e.dir.get(), e.name.c_str()) != 0) throw fail("rename to");
  return true;
}

bool ContainerRoot::Remove(const std::string& path) const {
  Entry e;
  try {
    e = Locate(path, false, false);
  } catch (const std::system_error& err) {
    if (err.code().value() == ENOENT || err.code().value() == ENOTDIR) return false;
    throw;
  }
  if (::unlinkat(e.dir.get(), e.name.c_str(), 0) != 0) {
    if (errno == ENOENT) return false;
    throw SysError(errno, "remove " + e.InRootPath() + " in " + path_);
  }
  return true;
}

bool ContainerRoot::Symlink(const std::string& target, const std::string& link) const {
  Entry e = Locate(link, false, true);
  if (e.name == ".") throw SysError(EEXIST, "link " + link + " names a directory");
  char buf[PATH_MAX];
  ssize_t n = ::readlinkat(e.dir.get(), e.name.c_str(), buf, sizeof buf);
  if (n >= 0 && std::string(buf, static_cast<size_t>(n)) == target) return false;
  // A fresh link renamed over the name: whoever looks sees the old entry or
  // the new link, never none.
  const std::string tmp = TempName(e.name);
  if (::symlinkat(target.c_str(), e.dir.get(), tmp.c_str()) != 0) {
    throw SysError(errno, "symlink " + JoinInRoot(e.dir_path, tmp) + " in " + path_);
  }
  if (::renameat(e.dir.get(), tmp.c_str(), e.dir.get(), e.name.c_str()) != 0) {
    int err = errno;
    ::unlinkat(e.dir.get(), tmp.c_str(), 0);
    throw SysError(err, "rename symlink to " + e.InRootPath() + " in " + path_);
  }
  return true;
}

std::vector<std::pair<std::string, unsigned char>> ContainerRoot::List(const std::string& path) const {
  std::vector<std::pair<std::string, unsigned char>> out;
  Entry e;
  try {
    e = Locate(path, true, false);
  } catch (const std::system_error& err) {
    if (err.code().value() == ENOENT || err.code().value() == ENOTDIR) return out;
    throw;
  }
  int fd = ::openat(e.dir.get(), e.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return out;
    throw SysError(errno, "open " + e.InRootPath() + " in " + path_);
  }
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    int err = errno;
    ::close(fd);
    throw SysError(err, "read " + e.InRootPath());
  }
  while (struct dirent* de = ::readdir(d)) {
    std::string name = de->d_name;
    if (name == "." || name == "..") continue;
    out.emplace_back(std::move(name), de->d_type);
  }
  ::closedir(d);
  return out;
}

UniqueFd ContainerRoot::OpenPath(const std::string& path, bool follow_last) const {
  Entry e = Locate(path, follow_last, false);
  UniqueFd fd(::openat(e.dir.get(), e.name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) throw SysError(errno, "open " + e.InRootPath() + " in " + path_);
  return fd;
}

}  // namespace nvdra::cdihook
