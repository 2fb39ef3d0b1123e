// DomainDirectories on real files: the daemon's directory with the config
// template, and removal of directories whose domain is gone.
#include "computedomain/domain_directory.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::computedomain {
namespace {

TEST(DomainDirectoriesTest, PrepareCreatesTheDirectoryWithTheTemplate) {
  nvdra::testing::TempDir tmp;
  std::string tmpl = JoinPath(tmp.path(), "daemon.tmpl.cfg");
  ASSERT_TRUE(WriteFileAtomically(tmpl, "IMEX_CMD_PORT=50005\n").ok());
  DomainDirectories dirs(JoinPath(tmp.path(), "plugin"), tmpl);
  ASSERT_TRUE(dirs.Prepare("d1").ok());
  ASSERT_TRUE(dirs.Prepare("d1").ok());  // idempotent
  auto copied = ReadFileToString(JoinPath(dirs.Dir("d1"), kDaemonConfigTemplateName));
  ASSERT_TRUE(copied.ok());
  EXPECT_EQ(*copied, "IMEX_CMD_PORT=50005\n");
  struct stat st {};
  ASSERT_EQ(::stat(dirs.Dir("d1").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  ASSERT_EQ(::stat(JoinPath(dirs.Dir("d1"), kDaemonConfigTemplateName).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_FALSE(dirs.Prepare("../x").ok());
}

TEST(DomainDirectoriesTest, AMissingTemplateSaysWhichFlagToSet) {
  nvdra::testing::TempDir tmp;
  DomainDirectories dirs(JoinPath(tmp.path(), "plugin"), JoinPath(tmp.path(), "absent.cfg"));
  Status s = dirs.Prepare("d1");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--compute-domain-daemon-config-template"), std::string::npos) << s.message();
}

TEST(DomainDirectoriesTest, RemovesOnlyDirectoriesOfDomainsKnownToBeGone) {
  nvdra::testing::TempDir tmp;
  std::string tmpl = JoinPath(tmp.path(), "t.cfg");
  ASSERT_TRUE(WriteFileAtomically(tmpl, "x").ok());
  DomainDirectories dirs(JoinPath(tmp.path(), "plugin"), tmpl);
  for (const char* d : {"live", "gone", "unknown"}) ASSERT_TRUE(dirs.Prepare(d).ok());
  auto removed = dirs.RemoveGone([](const std::string& uid) -> std::optional<bool> {
    if (uid == "live") return true;
    if (uid == "gone") return false;
    return std::nullopt;  // cannot tell: keep
  });
  EXPECT_EQ(removed, std::vector<std::string>{"gone"});
  EXPECT_TRUE(PathExists(dirs.Dir("live")));
  EXPECT_FALSE(PathExists(dirs.Dir("gone")));
  EXPECT_TRUE(PathExists(dirs.Dir("unknown")));
}

}  // namespace
}  // namespace nvdra::computedomain
