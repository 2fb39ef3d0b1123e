// Which processes hold a file open, found the way fuser(1) finds them: every
// <proc>/<pid>/fd/<n> is stat()ed and compared with the file. A character
// device matches by its device number, so a process that opened the same
// GPU through another node (a container's own /dev) is found too; any other
// file matches by device and inode.
//
// Passthrough uses it before it unbinds a GPU from nvidia: a GPU with a
// process on it must not be taken from that process.
#pragma once

#include <string>
#include <vector>

#include "util/status.h"

namespace nvdra::devices {

struct FileHolder {
  int pid = 0;
  // The process's comm ("nvidia-smi"); empty when unreadable.
  std::string command;
};

// The processes under `proc_root` with `path` open, sorted by pid. Processes
// that exit while they are read, and fds that cannot be stat()ed, are
// skipped. NotFound when `path` does not exist.
Result<std::vector<FileHolder>> ProcessesHolding(const std::string& proc_root, const std::string& path);

// "1234 (nvidia-smi), 99 (python3)".
std::string DescribeHolders(const std::vector<FileHolder>& holders);

}  // namespace nvdra::devices
