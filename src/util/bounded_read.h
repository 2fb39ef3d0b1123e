// Reading a file nvdra does not own (ld.so.cache, CDI specs read back,
// configs): someone may have planted a FIFO, a device or a huge file at its
// name. ReadRegularFile never blocks in open (a FIFO without a writer would
// hang it), refuses anything but a regular file (a FIFO, a device such as
// /dev/zero, also through a symlink, a directory) with InvalidArgument, and
// refuses a file longer than `max_bytes` from its size, before reading it.
// ReadFileToString (util/file_util.h) is ReadRegularFile with
// kMaxReadFileBytes.
#pragma once

#include <cstddef>
#include <string>

#include "util/status.h"

namespace nvdra {

// Far above any file nvdra reads, far below what would exhaust a node's
// memory.
inline constexpr size_t kMaxReadFileBytes = 64u << 20;

// NotFound when nothing is at `path`.
Result<std::string> ReadRegularFile(const std::string& path, size_t max_bytes);

}  // namespace nvdra
