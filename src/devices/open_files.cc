#include "devices/open_files.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <memory>

#include "util/file_util.h"
#include "util/parse_number.h"

namespace nvdra::devices {

namespace {

bool Matches(const struct stat& target, const struct stat& st) {
  if (S_ISCHR(target.st_mode)) return S_ISCHR(st.st_mode) && st.st_rdev == target.st_rdev;
  return st.st_dev == target.st_dev && st.st_ino == target.st_ino;
}

bool IsPid(const char* name) {
  if (*name == '\0') return false;
  for (const char* p = name; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9') return false;
  }
  return true;
}

using DirPtr = std::unique_ptr<DIR, int (*)(DIR*)>;

// Whether one of the process's fds is the file; false when it is gone.
bool HoldsFile(const std::string& fd_dir, const struct stat& target) {
  DirPtr dir(::opendir(fd_dir.c_str()), ::closedir);
  if (dir == nullptr) return false;
  while (struct dirent* e = ::readdir(dir.get())) {
    if (e->d_name[0] == '.') continue;
    struct stat st;
    if (::stat(JoinPath(fd_dir, e->d_name).c_str(), &st) == 0 && Matches(target, st)) return true;
  }
  return false;
}

std::string Command(const std::string& pid_dir) {
  auto comm = ReadFileToString(JoinPath(pid_dir, "comm"));
  if (!comm.ok()) return "";
  std::string c = *comm;
  while (!c.empty() && (c.back() == '\n' || c.back() == '\r')) c.pop_back();
  return c;
}

}  // namespace

Result<std::vector<FileHolder>> ProcessesHolding(const std::string& proc_root, const std::string& path) {
  struct stat target;
  if (::stat(path.c_str(), &target) != 0) {
    const int err = errno;
    if (err == ENOENT) return NotFound(path + " does not exist");
    return Internal("stat " + path + ": " + ErrnoText(err));
  }
  DirPtr proc(::opendir(proc_root.c_str()), ::closedir);
  if (proc == nullptr) return Internal("listing " + proc_root + ": " + ErrnoText(errno));
  std::vector<FileHolder> out;
  while (struct dirent* e = ::readdir(proc.get())) {
    if (!IsPid(e->d_name)) continue;
    const std::string pid_dir = JoinPath(proc_root, e->d_name);
    if (!HoldsFile(JoinPath(pid_dir, "fd"), target)) continue;
    // A name of digits past int's range is no process (a crafted root).
    auto pid = ParseUint64(e->d_name);
    if (!pid.ok() || *pid > static_cast<uint64_t>(std::numeric_limits<int>::max())) continue;
    out.push_back({static_cast<int>(*pid), Command(pid_dir)});
  }
  std::sort(out.begin(), out.end(), [](const FileHolder& a, const FileHolder& b) { return a.pid < b.pid; });
  return out;
}

std::string DescribeHolders(const std::vector<FileHolder>& holders) {
  std::string out;
  for (const auto& h : holders) {
    if (!out.empty()) out += ", ";
    out += std::to_string(h.pid);
    if (!h.command.empty()) out += " (" + h.command + ")";
  }
  return out;
}

}  // namespace nvdra::devices
