// A Unix socket file that this process owns. gRPC unlinks a Unix socket path
// whenever its listener shuts down, whoever owns the path by then, so we never
// let gRPC listen on the public name: it binds a private name next to it, and
// Publish() renames that over the public name (atomically replacing a stale
// socket). Removal later checks device and inode, so a socket that another
// plugin instance has put there since is left alone. A socket that still
// answers belongs to a live instance: we refuse to start rather than take
// its name (both would later delete or serve the other's socket).
#pragma once

#include <sys/types.h>

#include <string>

#include "util/status.h"

namespace nvdra::kubelet {

// The longest path a sockaddr_un can hold.
inline constexpr size_t kMaxSocketPathLength = 107;

// Published sockets get this mode whatever the umask: only the owner (the
// kubelet runs as root) may connect.
inline constexpr mode_t kSocketMode = 0600;

// Whether a process accepts connections on the Unix socket `path` now.
bool SocketAnswers(const std::string& path);

class SocketFile {
 public:
  // Creates the parent directory if needed and picks a private bind name.
  // Fails if `path` is too long, names something other than a socket (we
  // replace stale sockets, never a user's file or directory), or is a socket
  // that another process still serves (FailedPrecondition).
  static Result<SocketFile> Prepare(const std::string& path);

  SocketFile(SocketFile&&) = default;
  SocketFile& operator=(SocketFile&&) = default;

  const std::string& path() const { return path_; }
  // Where the server must listen before Publish().
  const std::string& bind_path() const { return bind_path_; }

  // Sets kSocketMode on the bound socket, renames it to path() and
  // remembers its identity.
  Status Publish();
  // True while path() still is the socket Publish() put there.
  bool StillOurs() const;
  // Unlinks path() if it still is ours; OK (and no-op) otherwise.
  Status RemoveIfOurs();

 private:
  SocketFile(std::string path, std::string bind_path) : path_(std::move(path)), bind_path_(std::move(bind_path)) {}

  std::string path_;
  std::string bind_path_;
  bool published_ = false;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

}  // namespace nvdra::kubelet
