#include "kubelet/socket_file.h"

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include "util/file_util.h"
#include "util/log.h"

namespace nvdra::kubelet {
bool SocketAnswers(const std::string& path) {
  // Non-blocking: a live but busy listener with a full backlog answers
  // EAGAIN instead of stalling our start; only ECONNREFUSED (no listener)
  // and ENOENT mean nobody is there.
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 || errno == EAGAIN;
  ::close(fd);
  return ok;
}

Result<SocketFile> SocketFile::Prepare(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path p(path);
  if (!p.is_absolute()) {
    return InvalidArgument(fmt::format("socket path {} must be absolute", path));
  }
  std::random_device rd;
  const unsigned nonce = rd();
  std::string bind =
      (p.parent_path() / fmt::format(".{}.{}-{:08x}", p.filename().string(), ::getpid(), nonce)).string();
  if (path.size() > kMaxSocketPathLength) {
    return InvalidArgument(fmt::format("socket path {} is too long: Unix sockets allow {} bytes; use a shorter "
                                       "directory or driver name",
                                       path, kMaxSocketPathLength));
  }
  // Names with a pod UID in them (--rolling-update-id) leave no room for the
  // full name twice; a short private name still fits.
  if (bind.size() > kMaxSocketPathLength) {
    bind = (p.parent_path() / fmt::format(".{}-{:08x}.sock", ::getpid(), nonce)).string();
  }
  if (bind.size() > kMaxSocketPathLength) {
    return InvalidArgument(
        fmt::format("socket path {} is too long: Unix sockets allow {} bytes and we need {} for a temporary "
                    "name next to it; use a shorter directory or driver name",
                    path, kMaxSocketPathLength, bind.size()));
  }
  NVDRA_RETURN_IF_ERROR(MakeDirectories(p.parent_path().string()));
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return FailedPrecondition(
          fmt::format("{} exists and is not a socket; refusing to replace it (remove it if it is not needed)", path));
    }
    if (SocketAnswers(path)) {
      return FailedPrecondition(
          fmt::format("{} is served by another running plugin instance; refusing to start beside it on the same "
                      "sockets (stop the other instance, or give each instance its own --rolling-update-id)",
                      path));
    } else {
      NVDRA_VLOG(1, "replacing stale socket {}", path);
    }
  } else if (errno != ENOENT) {
    return Internal(fmt::format("cannot inspect {}: {}", path, std::strerror(errno)));
  }
  return SocketFile(path, bind);
}

Status SocketFile::Publish() {
  struct stat st;
  if (::lstat(bind_path_.c_str(), &st) != 0) {
    return Internal(fmt::format("server socket {} was not created: {}", bind_path_, std::strerror(errno)));
  }
  // The mode the socket got from the umask is not the one we want (a umask
  // of 0 would let any local user drive the plugin).
  if (::chmod(bind_path_.c_str(), kSocketMode) != 0) {
    int err = errno;
    ::unlink(bind_path_.c_str());
    return Internal(fmt::format("cannot set the mode of socket {}: {}", bind_path_, std::strerror(err)));
  }
  if (::rename(bind_path_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    ::unlink(bind_path_.c_str());
    return Internal(fmt::format("cannot move socket into place at {}: {}", path_, std::strerror(err)));
  }
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  published_ = true;
  return Status::Ok();
}

bool SocketFile::StillOurs() const {
  if (!published_) return false;
  struct stat st;
  if (::lstat(path_.c_str(), &st) != 0) return false;
  return S_ISSOCK(st.st_mode) && st.st_dev == dev_ && st.st_ino == ino_;
}

Status SocketFile::RemoveIfOurs() {
  if (!StillOurs()) {
    if (published_) NVDRA_VLOG(1, "leaving {} alone: it is no longer our socket", path_);
    return Status::Ok();
  }
  published_ = false;
  if (::unlink(path_.c_str()) != 0 && errno != ENOENT) {
    return Internal(fmt::format("cannot remove socket {}: {}", path_, std::strerror(errno)));
  }
  return Status::Ok();
}

}  // namespace nvdra::kubelet
