// The dynamic linker's cache (/etc/ld.so.cache) in glibc's format: the
// "glibc-ld.so.cache1.1" table, alone or after the legacy "ld.so-1.7.0"
// table. Driver-file discovery reads it to find the libraries the driver
// installed, the way the NVIDIA Container Toolkit does; the mock driver root
// writes one so the same path runs without a GPU.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace nvdra::devices {

// Entry flags (glibc's FLAG_* values).
inline constexpr int32_t kLdCacheFlagElfLibc6 = 0x0003;
inline constexpr int32_t kLdCacheFlagX8664Lib64 = 0x0300;
inline constexpr int32_t kLdCacheFlagAarch64Lib64 = 0x0a00;

struct LdCacheEntry {
  std::string name;  // the key: usually the soname, e.g. "libcuda.so.1"
  std::string path;  // the value: where the linker finds it, e.g. "/usr/lib64/libcuda.so.1"
  int32_t flags = kLdCacheFlagElfLibc6 | kLdCacheFlagX8664Lib64;
  friend bool operator==(const LdCacheEntry&, const LdCacheEntry&) = default;
};

// Parses the bytes of an ld.so.cache. Entries whose strings lie outside the
// file are skipped; a file that is not a cache (bad magic, truncated table)
// is InvalidArgument.
Result<std::vector<LdCacheEntry>> ParseLdCache(std::string_view data);

// Reads and parses `path`; NotFound when the file does not exist.
Result<std::vector<LdCacheEntry>> ReadLdCache(const std::string& path);

// True for the entries of 64-bit libraries (x86-64, aarch64, ppc64le): the
// ones a container of this node's architecture loads.
bool IsLdCache64Bit(int32_t flags);

// Renders `entries` in the new format only (what glibc >= 2.32 writes).
std::string RenderLdCache(const std::vector<LdCacheEntry>& entries);

}  // namespace nvdra::devices
