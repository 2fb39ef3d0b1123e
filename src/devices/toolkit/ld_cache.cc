#include "devices/toolkit/ld_cache.h"

#include <cstring>

#include "util/file_util.h"

namespace nvdra::devices {

namespace {

// Layout (all little-endian on the architectures we run on):
//   legacy header: "ld.so-1.7.0\0" (12 bytes), uint32 nlibs, then nlibs
//   entries of {int32 flags, uint32 key, uint32 value} (12 bytes); the new
//   table follows, aligned to 8 bytes from the file start.
//   new header (48 bytes): "glibc-ld.so.cache" "1.1", uint32 nlibs,
//   uint32 len_strings, uint8 flags, 3 bytes padding, uint32
//   extension_offset, 3 x uint32 unused; then nlibs entries of {int32 flags,
//   uint32 key, uint32 value, uint32 osversion, uint64 hwcap} (24 bytes).
//   Key and value are offsets from the start of the new header.
constexpr std::string_view kOldMagic("ld.so-1.7.0\0", 12);
constexpr std::string_view kNewMagic = "glibc-ld.so.cache1.1";
constexpr size_t kOldHeaderSize = 16;
constexpr size_t kOldEntrySize = 12;
constexpr size_t kNewHeaderSize = 48;
constexpr size_t kNewEntrySize = 24;

uint32_t ReadU32(std::string_view d, size_t off) {
  uint32_t v;
  std::memcpy(&v, d.data() + off, sizeof v);
  return v;
}

void PutU32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }

// The NUL-terminated string at `off` of `table`, or "" when it runs off the end.
std::string CString(std::string_view table, uint32_t off) {
  if (off >= table.size()) return "";
  size_t end = table.find('\0', off);
  if (end == std::string_view::npos) return "";
  return std::string(table.substr(off, end - off));
}

}  // namespace

bool IsLdCache64Bit(int32_t flags) {
  if ((flags & 0x00ff & 0x0001) == 0) return false;  // not ELF
  int32_t arch = flags & 0xff00;
  return arch == kLdCacheFlagX8664Lib64 || arch == kLdCacheFlagAarch64Lib64 || arch == 0x0500 /* ppc64le */;
}

Result<std::vector<LdCacheEntry>> ParseLdCache(std::string_view data) {
  size_t start = 0;
  if (data.size() >= kOldHeaderSize && data.substr(0, kOldMagic.size()) == kOldMagic) {
    uint64_t nlibs = ReadU32(data, kOldMagic.size());
    uint64_t after = kOldHeaderSize + nlibs * kOldEntrySize;
    if (after > data.size()) return InvalidArgument("ld.so.cache: legacy table is truncated");
    start = static_cast<size_t>((after + 7) & ~uint64_t{7});
  }
  if (start + kNewHeaderSize > data.size() || data.substr(start, kNewMagic.size()) != kNewMagic) {
    return InvalidArgument("ld.so.cache: no glibc-ld.so.cache1.1 table (unknown format or truncated file)");
  }
  std::string_view table = data.substr(start);
  uint64_t nlibs = ReadU32(table, 20);
  if (kNewHeaderSize + nlibs * kNewEntrySize > table.size()) {
    return InvalidArgument("ld.so.cache: entry table is truncated (" + std::to_string(nlibs) + " entries)");
  }
  std::vector<LdCacheEntry> out;
  out.reserve(static_cast<size_t>(nlibs));
  for (uint64_t i = 0; i < nlibs; ++i) {
    size_t off = kNewHeaderSize + static_cast<size_t>(i) * kNewEntrySize;
    LdCacheEntry e;
    e.flags = static_cast<int32_t>(ReadU32(table, off));
    e.name = CString(table, ReadU32(table, off + 4));
    e.path = CString(table, ReadU32(table, off + 8));
    if (e.name.empty() || e.path.empty()) continue;
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::vector<LdCacheEntry>> ReadLdCache(const std::string& path) {
  auto data = ReadFileToString(path);
  if (!data.ok()) return data.status();
  auto entries = ParseLdCache(*data);
  if (!entries.ok()) return entries.status().Wrap(path);
  return entries;
}

std::string RenderLdCache(const std::vector<LdCacheEntry>& entries) {
  std::string strings;
  std::vector<std::pair<uint32_t, uint32_t>> offsets;
  const size_t table_end = kNewHeaderSize + entries.size() * kNewEntrySize;
  for (const auto& e : entries) {
    uint32_t k = static_cast<uint32_t>(table_end + strings.size());
    strings.append(e.name).push_back('\0');
    uint32_t v = static_cast<uint32_t>(table_end + strings.size());
    strings.append(e.path).push_back('\0');
    offsets.emplace_back(k, v);
  }
  std::string out(kNewMagic);
  PutU32(out, static_cast<uint32_t>(entries.size()));
  PutU32(out, static_cast<uint32_t>(strings.size()));
  out.push_back('\2');  // cache_file_new.flags: little-endian
  out.append(3, '\0');
  PutU32(out, 0);  // no extensions
  out.append(12, '\0');
  for (size_t i = 0; i < entries.size(); ++i) {
    PutU32(out, static_cast<uint32_t>(entries[i].flags));
    PutU32(out, offsets[i].first);
    PutU32(out, offsets[i].second);
    PutU32(out, 0);       // osversion
    out.append(8, '\0');  // hwcap
  }
  out += strings;
  return out;
}

}  // namespace nvdra::devices
