#include "cmd/nvdra-cdi-hook/in_root.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "util/test_temp_dir.h"

namespace nvdra::cdihook {
namespace {

namespace fs = std::filesystem;

// A container root (root/) beside a directory standing for the host's
// files (host/), which no operation in the root may change.
struct RootTree {
  nvdra::testing::TempDir tmp{"nvdra-inroot"};
  std::string root = tmp.path() + "/root";
  std::string host = tmp.path() + "/host";
  RootTree() {
    fs::create_directories(root);
    fs::create_directories(host);
  }
  void File(const std::string& p, const std::string& content = "x") const {
    fs::create_directories(fs::path(root + p).parent_path());
    std::ofstream(root + p) << content;
  }
  void Link(const std::string& p, const std::string& target) const {
    fs::create_directories(fs::path(root + p).parent_path());
    fs::create_symlink(target, root + p);
  }
  bool HostEmpty() const { return fs::is_empty(host); }
};

TEST(PathComponentsTest, SplitsAndDropsEmpty) {
  EXPECT_EQ(PathComponents("/a//b/./c/"), (std::vector<std::string>{"a", "b", ".", "c"}));
  EXPECT_TRUE(PathComponents("/").empty());
}

TEST(ContainerRootTest, ResolvesLinksInsideTheRoot) {
  RootTree t;
  t.File("/usr/lib64/real.so");
  t.Link("/lib64", "usr/lib64");
  t.Link("/usr/lib64/abs.so", "/lib64/real.so");
  t.Link("/usr/lib64/up.so", "../../../../../../usr/lib64/real.so");
  ContainerRoot r(t.root);
  EXPECT_EQ(r.Resolve("/lib64/abs.so"), "/usr/lib64/real.so");
  EXPECT_EQ(r.Resolve("/usr/lib64/up.so"), "/usr/lib64/real.so");
  EXPECT_EQ(r.Resolve("/usr/../../../usr/./lib64/real.so"), "/usr/lib64/real.so") << ".. stops at the root";
  EXPECT_EQ(r.Resolve("/"), "/");
  EXPECT_EQ(r.Resolve("/usr/lib64/.."), "/usr");
  EXPECT_EQ(r.Resolve("/usr/lib64/missing.so"), std::nullopt);
  EXPECT_EQ(r.Resolve("/nodir/missing.so"), std::nullopt);
}

TEST(ContainerRootTest, AHostileAbsoluteLinkStaysInTheRoot) {
  RootTree t;
  // The image's library directory points at a host directory by its host
  // path: inside the root, that path is the root's own.
  t.Link("/usr/lib/x86_64-linux-gnu", t.host);
  ContainerRoot r(t.root);
  EXPECT_TRUE(r.Symlink("libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so"));
  EXPECT_TRUE(t.HostEmpty());
  EXPECT_EQ(fs::read_symlink(t.root + t.host + "/libcuda.so"), "libcuda.so.1");
  EXPECT_TRUE(r.WriteFile("/usr/lib/x86_64-linux-gnu/conf", "y\n", 0644));
  EXPECT_TRUE(t.HostEmpty());
  EXPECT_TRUE(fs::exists(t.root + t.host + "/conf"));
}

TEST(ContainerRootTest, AHostileRelativeLinkStaysInTheRoot) {
  RootTree t;
  // Enough ".." to leave the root and reach host/ if it were followed naively.
  t.Link("/etc/ld.so.conf.d", "../../../../../../../../.." + t.host);
  ContainerRoot r(t.root);
  r.WriteFile("/etc/ld.so.conf.d/00.conf", "/x\n", 0644);
  EXPECT_TRUE(t.HostEmpty());
  EXPECT_EQ(r.ReadFile("/etc/ld.so.conf.d/00.conf"), "/x\n");
  EXPECT_TRUE(fs::exists(t.root + t.host + "/00.conf"));
}

TEST(ContainerRootTest, AFileLinkIsReplacedNotWrittenThrough) {
  RootTree t;
  std::ofstream(t.host + "/victim") << "host";
  t.Link("/etc/ld.so.conf", t.host + "/victim");
  ContainerRoot r(t.root);
  EXPECT_EQ(r.ReadFile("/etc/ld.so.conf"), std::nullopt) << "read in the root, where it dangles";
  EXPECT_TRUE(r.WriteFile("/etc/ld.so.conf", "include x\n", 0644));
  std::ifstream victim(t.host + "/victim");
  std::string content((std::istreambuf_iterator<char>(victim)), {});
  EXPECT_EQ(content, "host");
  EXPECT_FALSE(fs::is_symlink(t.root + "/etc/ld.so.conf"));
}

TEST(ContainerRootTest, LinkLoopsFail) {
  RootTree t;
  t.Link("/a", "b");
  t.Link("/b", "/a");
  ContainerRoot r(t.root);
  try {
    r.Resolve("/a/x");
    FAIL() << "a loop resolved";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), ELOOP);
  }
}

TEST(ContainerRootTest, SymlinkAndWriteAreIdempotent) {
  RootTree t;
  ContainerRoot r(t.root);
  EXPECT_TRUE(r.Symlink("libcuda.so.1", "/usr/lib64/libcuda.so"));
  EXPECT_FALSE(r.Symlink("libcuda.so.1", "/usr/lib64/libcuda.so")) << "an existing correct link is kept";
  EXPECT_TRUE(r.Symlink("libcuda.so.2", "/usr/lib64/libcuda.so")) << "a wrong one is replaced";
  EXPECT_EQ(fs::read_symlink(t.root + "/usr/lib64/libcuda.so"), "libcuda.so.2");
  EXPECT_TRUE(r.WriteFile("/etc/a.conf", "x\n", 0644));
  EXPECT_FALSE(r.WriteFile("/etc/a.conf", "x\n", 0644));
  EXPECT_TRUE(r.WriteFile("/etc/a.conf", "x\n", 0600)) << "another mode is a change";
  struct stat st;
  ASSERT_EQ(::stat((t.root + "/etc/a.conf").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // No temporary files left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(t.root + "/etc"), fs::directory_iterator()), 1);
  EXPECT_EQ(std::distance(fs::directory_iterator(t.root + "/usr/lib64"), fs::directory_iterator()), 1);
}

TEST(ContainerRootTest, ReadFileRefusesAFifo) {
  RootTree t;
  fs::create_directories(t.root + "/etc");
  ASSERT_EQ(::mkfifo((t.root + "/etc/ld.so.conf").c_str(), 0644), 0);
  ContainerRoot r(t.root);
  EXPECT_THROW(r.ReadFile("/etc/ld.so.conf"), std::system_error);
}

TEST(ContainerRootTest, AFileInTheWayIsNotADirectory) {
  RootTree t;
  t.File("/usr/lib");
  ContainerRoot r(t.root);
  try {
    r.Symlink("x", "/usr/lib/y");
    FAIL() << "made a link below a file";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), ENOTDIR);
  }
  EXPECT_THROW(ContainerRoot(t.root + "/usr/lib"), std::system_error);
}

}  // namespace
}  // namespace nvdra::cdihook
