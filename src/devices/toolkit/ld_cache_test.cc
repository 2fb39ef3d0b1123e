// The ld.so.cache reader and writer: new-format round trips, the legacy
// table in front of the new one, damaged files, and this machine's own cache.
#include "devices/toolkit/ld_cache.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::devices {
namespace {

constexpr int32_t kLib64 = kLdCacheFlagElfLibc6 | kLdCacheFlagX8664Lib64;

void PutU32(std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }

TEST(LdCacheTest, AFifoOrADevicePlantedAsTheCacheIsRefusedWithoutBlocking) {
  ::nvdra::testing::TempDir tmp{"nvdra-ld-cache"};
  const std::string fifo = JoinPath(tmp.path(), "ld.so.cache");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  // No writer: a blocking open would hang startup here, deaf to SIGTERM.
  auto r = ReadLdCache(fifo);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "refusing to read " + fifo + ": it is a FIFO, not a regular file");
  const std::string zero = JoinPath(tmp.path(), "zero");
  ASSERT_EQ(::symlink("/dev/zero", zero.c_str()), 0);
  auto z = ReadLdCache(zero);
  ASSERT_FALSE(z.ok());
  EXPECT_EQ(z.status().message(), "refusing to read " + zero + ": it is a character device, not a regular file");
}

TEST(LdCacheTest, RoundTrip) {
  std::vector<LdCacheEntry> in = {
      {"libcuda.so.1", "/usr/lib64/libcuda.so.1", kLib64},
      {"libfoo.so.2", "/opt/my libs/libfoo.so.2", kLdCacheFlagElfLibc6},
      {"libarm.so.1", "/usr/lib/aarch64-linux-gnu/libarm.so.1", kLdCacheFlagElfLibc6 | kLdCacheFlagAarch64Lib64}};
  std::string bytes = RenderLdCache(in);
  ASSERT_EQ(bytes.compare(0, 20, "glibc-ld.so.cache1.1"), 0);
  auto out = ParseLdCache(bytes);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, in);
  EXPECT_TRUE(IsLdCache64Bit((*out)[0].flags));
  EXPECT_FALSE(IsLdCache64Bit((*out)[1].flags)) << "i386 entries are 32-bit";
  EXPECT_TRUE(IsLdCache64Bit((*out)[2].flags));
}

TEST(LdCacheTest, LegacyTableInFront) {
  std::string newer = RenderLdCache({{"libcuda.so.1", "/lib64/libcuda.so.1", kLib64}});
  std::string file("ld.so-1.7.0\0", 12);
  PutU32(file, 1);                                    // one legacy entry
  PutU32(file, 0x0303);                               // flags
  PutU32(file, 0);                                    // key
  PutU32(file, 0);                                    // value
  while (file.size() % 8 != 0) file.push_back('\0');  // 28 -> 32
  file += newer;
  auto out = ParseLdCache(file);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].path, "/lib64/libcuda.so.1");
}

TEST(LdCacheTest, DamagedFilesAreErrors) {
  EXPECT_EQ(ParseLdCache("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseLdCache("not a cache at all, just some text that is long enough").status().code(),
            StatusCode::kInvalidArgument);
  std::string bytes = RenderLdCache({{"a.so", "/a.so", kLib64}, {"b.so", "/b.so", kLib64}});
  // Cut inside the entry table.
  EXPECT_EQ(ParseLdCache(bytes.substr(0, 48 + 24)).status().code(), StatusCode::kInvalidArgument);
  std::string legacy("ld.so-1.7.0\0", 12);
  PutU32(legacy, 1000);  // claims more legacy entries than there are bytes
  EXPECT_EQ(ParseLdCache(legacy + bytes).status().code(), StatusCode::kInvalidArgument);
}

TEST(LdCacheTest, EntriesWithStringsOutsideTheFileAreSkipped) {
  std::string bytes = RenderLdCache({{"liba.so.1", "/lib/liba.so.1", kLib64}, {"libb.so.1", "/lib/libb.so.1", kLib64}});
  // Point the first entry's value far past the end.
  uint32_t bad = 1u << 30;
  std::memcpy(bytes.data() + 48 + 8, &bad, 4);
  auto out = ParseLdCache(bytes);
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->size(), 1u);
  EXPECT_EQ((*out)[0].name, "libb.so.1");
}

TEST(LdCacheTest, ReadsThisMachinesCache) {
  if (!PathExists("/etc/ld.so.cache")) GTEST_SKIP() << "no /etc/ld.so.cache here";
  auto out = ReadLdCache("/etc/ld.so.cache");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  bool libc = false;
  for (const auto& e : *out) libc = libc || (e.name == "libc.so.6" && IsLdCache64Bit(e.flags));
  EXPECT_TRUE(libc) << "glibc's own cache lists the 64-bit libc.so.6";
}

TEST(LdCacheTest, MissingFileIsNotFound) {
  EXPECT_EQ(ReadLdCache("/nonexistent/ld.so.cache").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace nvdra::devices
