// A container's root file system as the CDI hook sees it: the hook runs in
// the runtime's namespaces with the host's "/", so every container path is
// resolved here one component at a time below the root's directory fd. A
// symlink's target is resolved as the container would see it (absolute
// targets from the container's root, ".." never above it), so a link
// planted in an image never leads the hook to a host file, and a link
// swapped in while the hook runs fails the open (O_NOFOLLOW) instead of
// being followed.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace nvdra::cdihook {

// An owned file descriptor.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd();
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Thrown for a failed system call; code() carries errno.
std::system_error SysError(int err, const std::string& what);

// Splits "a/b//c" into {"a", "b", "c"}.
std::vector<std::string> PathComponents(const std::string& path);

class ContainerRoot {
 public:
  // Opens `path` (a host path) as the root; throws when it is no directory.
  explicit ContainerRoot(const std::string& path);

  const std::string& path() const { return path_; }

  // The directory that holds the last component of `path` and that
  // component. `dir_path` is the directory's path inside the root, free of
  // symlinks. A path naming the root itself gives the root and ".".
  struct Entry {
    UniqueFd dir;
    std::string dir_path;
    std::string name;
    // The entry's path inside the root ("/usr/lib/libcuda.so").
    std::string InRootPath() const;
  };
  // `follow_last`: a last component that is a symlink is followed as well.
  // `make_parents`: missing directories on the way are made (mode 0755).
  // A missing directory on the way (without `make_parents`) throws ENOENT;
  // a missing last component is no error (the caller looks).
  Entry Locate(const std::string& path, bool follow_last, bool make_parents) const;

  // What `path` names with every symlink resolved, as a path inside the
  // root; nullopt when it does not exist.
  std::optional<std::string> Resolve(const std::string& path) const;

  // Whether `path` (symlinks followed) exists; `dir`: and is a directory.
  bool Exists(const std::string& path, bool dir = false) const;

  // The content of the regular file `path` (symlinks followed); nullopt
  // when it does not exist. Anything but a regular file throws (a FIFO
  // planted in an image must not block the hook).
  std::optional<std::string> ReadFile(const std::string& path) const;

  // Replaces `path` (a symlink there is replaced, never written through)
  // with `content` atomically: temporary file, fsync, rename. Directories
  // on the way are made. Returns false when the file already held exactly
  // `content` with `mode` (nothing written).
  bool WriteFile(const std::string& path, const std::string& content, mode_t mode) const;

  // Removes the file or link `path` (not followed); false when absent.
  bool Remove(const std::string& path) const;

  // Makes `link` a symlink to `target` (taken literally, as the container
  // resolves it): directories on the way are made, and something else at
  // `link` is replaced atomically. Returns false when `link` already is a
  // symlink to `target`.
  bool Symlink(const std::string& target, const std::string& link) const;

  // Names in the directory `path` (symlinks followed) with their d_type;
  // empty when the directory does not exist.
  std::vector<std::pair<std::string, unsigned char>> List(const std::string& path) const;

  // An O_PATH descriptor of `path` (last component not followed), for
  // mounts through /proc/self/fd; throws when absent.
  UniqueFd OpenPath(const std::string& path, bool follow_last) const;

  // The root's directory descriptor.
  int fd() const { return fd_.get(); }

 private:
  std::string path_;
  UniqueFd fd_;
};

}  // namespace nvdra::cdihook
