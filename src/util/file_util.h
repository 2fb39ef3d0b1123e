// Small, honest wrappers around POSIX file calls: every durable write here is
// temp file + fsync + rename + directory fsync, so a crash leaves either the
// old or the new content under the final name, never a mix.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "util/status.h"

namespace nvdra {

Result<std::string> ReadFileToString(const std::string& path);

// Writes `content` to `path` atomically (temp file in the same directory,
// fsync, rename, fsync of the directory). `mode` applies to the new file.
Status WriteFileAtomically(const std::string& path, const std::string& content, mode_t mode = 0644, bool sync = true);

Status FsyncDirectory(const std::string& dir);

// mkdir -p with `mode` for created directories.
Status MakeDirectories(const std::string& path, mode_t mode = 0750);

// Removes a file; a missing file is success.
Status RemoveFileIfExists(const std::string& path);

bool PathExists(const std::string& path);

// Names of the entries in `dir` (no "." or ".."), sorted.
Result<std::vector<std::string>> ListDirectory(const std::string& dir);

std::string JoinPath(const std::string& a, const std::string& b);

// "<errno text>" for messages.
std::string ErrnoText(int err);

}  // namespace nvdra
