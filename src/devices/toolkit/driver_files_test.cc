// Driver-file discovery on odd driver roots: lib64 and multiarch layouts,
// with and without an ld.so.cache, a missing library, two driver versions
// side by side, a driver root that is a symlink, libraries that are
// directories or dangling links, paths with spaces; the hooks; the cache's
// refresh on a driver change; the mock driver installation.
#include "devices/toolkit/driver_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "devices/mock/mock_device_lib.h"
#include "devices/mock/mock_driver_install.h"
#include "devices/toolkit/ld_cache.h"
#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::devices {
namespace {

constexpr int32_t k64 = kLdCacheFlagElfLibc6 | kLdCacheFlagX8664Lib64;

class Tree {
 public:
  explicit Tree(std::string root) : root_(std::move(root)) {}
  const std::string& root() const { return root_; }
  void File(const std::string& p, mode_t mode = 0644) {
    Dir(p.substr(0, p.rfind('/')));
    ASSERT_TRUE(WriteFileAtomically(root_ + p, "", mode, false).ok()) << p;
  }
  void Dir(const std::string& p) { ASSERT_TRUE(MakeDirectories(root_ + p, 0755).ok()) << p; }
  void Link(const std::string& p, const std::string& target) {
    Dir(p.substr(0, p.rfind('/')));
    ASSERT_EQ(::symlink(target.c_str(), (root_ + p).c_str()), 0) << p;
  }
  // A library with ldconfig's soname link, and the installer's .so link when `dev`.
  void Lib(const std::string& dir, const std::string& stem, const std::string& soversion, const std::string& version,
           bool dev = false) {
    File(dir + "/" + stem + ".so." + version, 0755);
    Link(dir + "/" + stem + ".so." + soversion, stem + ".so." + version);
    if (dev) Link(dir + "/" + stem + ".so", stem + ".so." + soversion);
    cache_.push_back({stem + ".so." + soversion, dir + "/" + stem + ".so." + soversion, k64});
  }
  void CacheEntry(const std::string& name, const std::string& path, int32_t flags = k64) {
    cache_.push_back({name, path, flags});
  }
  void WriteCache() {
    Dir("/etc");
    ASSERT_TRUE(WriteFileAtomically(root_ + "/etc/ld.so.cache", RenderLdCache(cache_), 0644, false).ok());
  }

 private:
  std::string root_;
  std::vector<LdCacheEntry> cache_;
};

std::vector<std::string> ContainerPaths(const std::vector<cdi::Mount>& mounts) {
  std::vector<std::string> out;
  for (const auto& m : mounts) out.push_back(m.container_path);
  return out;
}

bool Has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

const cdi::Hook* FindHook(const cdi::ContainerEdits& e, const std::string& name) {
  for (const auto& h : e.hooks) {
    if (h.args.size() >= 2 && h.args[1] == name) return &h;
  }
  return nullptr;
}

TEST(DriverFilesTest, Lib64LayoutFromTheCache) {
  nvdra::testing::TempDir tmp;
  Tree t(tmp.path());
  t.Lib("/usr/lib64", "libcuda", "1", "570.158.01", true);
  t.Lib("/usr/lib64", "libnvidia-ml", "1", "570.158.01");
  t.Lib("/usr/lib64", "libnvidia-nvvm", "4", "570.158.01");
  t.File("/usr/lib64/libnvidia-gpucomp.so.570.158.01", 0755);
  t.CacheEntry("libnvidia-gpucomp.so.570.158.01", "/usr/lib64/libnvidia-gpucomp.so.570.158.01");
  t.CacheEntry("libc.so.6", "/usr/lib64/libc.so.6");  // not the driver's, and absent
  t.File("/usr/lib64/libnvidia-nvvm70.so.4", 0755);
  t.File("/usr/bin/nvidia-smi", 0755);
  t.File("/usr/bin/nvidia-debugdump", 0644);  // not executable: not a binary to mount
  t.File("/lib/firmware/nvidia/570.158.01/gsp_ga10x.bin");
  t.File("/run/nvidia-persistenced/socket");
  t.WriteCache();

  auto files = DiscoverDriverFiles(DriverRoot(t.root(), "/run/nvidia/driver"), "570.158.01");
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  auto libs = ContainerPaths(files->libraries);
  EXPECT_EQ(libs, (std::vector<std::string>{"/usr/lib64/libcuda.so.570.158.01", "/usr/lib64/libnvidia-ml.so.570.158.01",
                                            "/usr/lib64/libnvidia-nvvm.so.570.158.01",
                                            "/usr/lib64/libnvidia-gpucomp.so.570.158.01",
                                            "/usr/lib64/libnvidia-nvvm70.so.4"}));
  EXPECT_EQ(files->libraries[0].host_path, "/run/nvidia/driver/usr/lib64/libcuda.so.570.158.01");
  EXPECT_EQ(files->libraries[0].options, (std::vector<std::string>{"ro", "nosuid", "nodev", "rbind", "rprivate"}));
  EXPECT_EQ(files->library_dirs, std::vector<std::string>{"/usr/lib64"});
  EXPECT_TRUE(Has(files->symlinks, "libcuda.so.570.158.01::/usr/lib64/libcuda.so.1"));
  EXPECT_TRUE(Has(files->symlinks, "libcuda.so.1::/usr/lib64/libcuda.so"));
  EXPECT_TRUE(Has(files->symlinks, "libnvidia-ml.so.570.158.01::/usr/lib64/libnvidia-ml.so.1"));
  EXPECT_FALSE(Has(files->symlinks, "libnvidia-ml.so.1::/usr/lib64/libnvidia-ml.so"))
      << "no .so link on the host, none in the container";
  EXPECT_EQ(ContainerPaths(files->binaries), std::vector<std::string>{"/usr/bin/nvidia-smi"});
  EXPECT_EQ(ContainerPaths(files->firmware), std::vector<std::string>{"/lib/firmware/nvidia/570.158.01/gsp_ga10x.bin"});
  ASSERT_EQ(files->ipc.size(), 1u);
  EXPECT_EQ(files->ipc[0].container_path, "/run/nvidia-persistenced/socket");
  EXPECT_EQ(files->ipc[0].host_path, "/run/nvidia/driver/run/nvidia-persistenced/socket");
  EXPECT_EQ(files->ipc[0].options, (std::vector<std::string>{"nosuid", "nodev", "rbind", "rprivate", "noexec"}));
}

TEST(DriverFilesTest, MultiarchLayoutWithoutCacheReadsDirectories) {
  nvdra::testing::TempDir tmp;
  Tree t(tmp.path());
  t.Lib("/usr/lib/x86_64-linux-gnu", "libcuda", "1", "550.127.08", true);
  t.Lib("/usr/lib/x86_64-linux-gnu", "libnvidia-ml", "1", "550.127.08");
  t.File("/usr/lib/x86_64-linux-gnu/vdpau/libvdpau_nvidia.so.550.127.08", 0755);
  auto files = DiscoverDriverFiles(DriverRoot(t.root(), "/"), "550.127.08");
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  auto libs = ContainerPaths(files->libraries);
  EXPECT_TRUE(Has(libs, "/usr/lib/x86_64-linux-gnu/libcuda.so.550.127.08"));
  EXPECT_TRUE(Has(libs, "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.127.08"));
  EXPECT_TRUE(Has(libs, "/usr/lib/x86_64-linux-gnu/vdpau/libvdpau_nvidia.so.550.127.08"));
  EXPECT_EQ(files->library_dirs, std::vector<std::string>{"/usr/lib/x86_64-linux-gnu"});
  // Host root "/": host paths are the in-root paths.
  EXPECT_EQ(files->libraries[0].host_path, files->libraries[0].container_path);
  auto edits = files->Edits("/var/lib/kubelet/plugins/gpu.nvidia.com/nvidia-cdi-hook");
  const cdi::Hook* ld = FindHook(edits, "update-ldcache");
  ASSERT_NE(ld, nullptr);
  EXPECT_EQ(ld->args,
            (std::vector<std::string>{"nvidia-cdi-hook", "update-ldcache", "--folder", "/usr/lib/x86_64-linux-gnu",
                                      "--folder", "/usr/lib/x86_64-linux-gnu/vdpau"}));
}

TEST(DriverFilesTest, MissingLibraryIsSkippedAndNoCoreLibraryIsNotFound) {
  nvdra::testing::TempDir tmp;
  Tree t(tmp.path());
  t.Lib("/usr/lib64", "libcuda", "1", "570.1");
  t.CacheEntry("libnvidia-ptxjitcompiler.so.1", "/usr/lib64/libnvidia-ptxjitcompiler.so.1");  // file gone
  t.WriteCache();
  auto files = DiscoverDriverFiles(DriverRoot(t.root(), "/"), "570.1");
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  EXPECT_EQ(ContainerPaths(files->libraries), std::vector<std::string>{"/usr/lib64/libcuda.so.570.1"});

  auto other = DiscoverDriverFiles(DriverRoot(t.root(), "/"), "580.2");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), StatusCode::kNotFound);
  EXPECT_NE(other.status().message().find("libcuda.so.580.2"), std::string::npos) << other.status().message();
}

TEST(DriverFilesTest, TwoVersionsSideBySideTakeNvmls) {
  nvdra::testing::TempDir tmp;
  Tree t(tmp.path());
  t.File("/usr/lib64/libcuda.so.550.127.08", 0755);
  t.Lib("/usr/lib64", "libcuda", "1", "570.158.01");  // the soname link follows the new driver
  t.Lib("/usr/lib64", "libnvidia-ml", "1", "570.158.01");
  t.File("/usr/lib64/libnvidia-ml.so.550.127.08", 0755);
  t.CacheEntry("libnvidia-ml.so.550.127.08", "/usr/lib64/libnvidia-ml.so.550.127.08");
  t.File("/lib/firmware/nvidia/550.127.08/gsp_ga10x.bin");
  t.File("/lib/firmware/nvidia/570.158.01/gsp_ga10x.bin");
  t.WriteCache();
  auto files = DiscoverDriverFiles(DriverRoot(t.root(), "/"), "570.158.01");
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  for (const auto& m : files->libraries) {
    EXPECT_EQ(m.container_path.find("550"), std::string::npos) << m.container_path;
  }
  EXPECT_EQ(files->libraries.size(), 2u);
  EXPECT_EQ(ContainerPaths(files->firmware), std::vector<std::string>{"/lib/firmware/nvidia/570.158.01/gsp_ga10x.bin"});
  auto edits = files->Edits("/hook/nvidia-cdi-hook");
  const cdi::Hook* compat = FindHook(edits, "enable-cuda-compat");
  ASSERT_NE(compat, nullptr);
  EXPECT_EQ(compat->args.back(), "--host-driver-version=570.158.01");
}

TEST(DriverFilesTest, DriverRootThatIsASymlink) {
  nvdra::testing::TempDir tmp;
  Tree t(tmp.path() + "/parent/driver");
  t.Lib("/usr/lib64", "libcuda", "1", "570.1", true);
  // An absolute link inside the root points into the root, not the host.
  t.Link("/usr/lib64/libnvidia-ml.so.1", "/usr/lib64/libnvidia-ml.so.570.1");
  t.File("/usr/lib64/libnvidia-ml.so.570.1", 0755);
  t.CacheEntry("libnvidia-ml.so.1", "/usr/lib64/libnvidia-ml.so.1");
  t.WriteCache();
  ASSERT_EQ(::symlink((tmp.path() + "/parent/driver").c_str(), (tmp.path() + "/driver-root").c_str()), 0);
  auto files = DiscoverDriverFiles(DriverRoot(tmp.path() + "/driver-root", "/run/nvidia/driver"), "570.1");
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  EXPECT_EQ(ContainerPaths(files->libraries),
            (std::vector<std::string>{"/usr/lib64/libcuda.so.570.1", "/usr/lib64/libnvidia-ml.so.570.1"}));
  EXPECT_EQ(files->libraries[1].host_path, "/run/nvidia/driver/usr/lib64/libnvidia-ml.so.570.1");
}

TEST(DriverFilesTest, DirectoriesAndDanglingLinksAreSkipped) {
  nvdra::testing::TempDir tmp;
  Tree t(tmp.path());
  t.Lib("/usr/lib64", "libcuda", "1", "570.1");
  t.Dir("/usr/lib64/libnvidia-dir.so.570.1");
  t.Link("/usr/lib64/libnvidia-gone.so.570.1", "libnvidia-gone.so.570.1.real");
  t.Link("/usr/lib64/libnvidia-loop.so.570.1", "libnvidia-loop.so.570.1");
  t.CacheEntry("libnvidia-dir.so.570.1", "/usr/lib64/libnvidia-dir.so.570.1");
  t.CacheEntry("libnvidia-gone.so.570.1", "/usr/lib64/libnvidia-gone.so.570.1");
  t.WriteCache();
  auto files = DiscoverDriverFiles(DriverRoot(t.root(), "/"), "570.1");
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  EXPECT_EQ(ContainerPaths(files->libraries), std::vector<std::string>{"/usr/lib64/libcuda.so.570.1"});
}

TEST(DriverFilesTest, PathsWithSpaces) {
  nvdra::testing::TempDir tmp;
  Tree t(tmp.path() + "/my driver");
  t.Lib("/opt/nvidia libs", "libcuda", "1", "570.1", true);
  t.WriteCache();
  auto files = DiscoverDriverFiles(DriverRoot(t.root(), "/run/my driver"), "570.1");
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  ASSERT_EQ(files->libraries.size(), 1u);
  EXPECT_EQ(files->libraries[0].container_path, "/opt/nvidia libs/libcuda.so.570.1");
  EXPECT_EQ(files->libraries[0].host_path, "/run/my driver/opt/nvidia libs/libcuda.so.570.1");
  auto edits = files->Edits("/plugins/gpu/nvidia-cdi-hook");
  EXPECT_TRUE(Has(edits.env, "NVIDIA_CTK_LIBCUDA_DIR=/opt/nvidia libs"));
  const cdi::Hook* links = FindHook(edits, "create-symlinks");
  ASSERT_NE(links, nullptr);
  EXPECT_TRUE(Has(links->args, "libcuda.so.1::/opt/nvidia libs/libcuda.so"));
}

// The create-symlinks hook splits each --link at "::": a library whose name
// holds "::" would give it "libx::y.so.570.1::/usr/lib64/libx::y.so.1", read
// as another link. Its link is skipped (the library is still mounted), and
// every argument the hook gets has exactly one "::".
TEST(DriverFilesTest, ALibraryNamedWithTwoColonsGetsNoAmbiguousLink) {
  nvdra::testing::TempDir tmp;
  Tree t(tmp.path());
  t.Lib("/usr/lib64", "libcuda", "1", "570.1", true);
  t.Lib("/usr/lib64", "libx::y", "1", "570.1");
  t.WriteCache();
  auto files = DiscoverDriverFiles(DriverRoot(t.root(), "/"), "570.1");
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  EXPECT_TRUE(Has(ContainerPaths(files->libraries), "/usr/lib64/libx::y.so.570.1"));
  auto edits = files->Edits("/plugins/gpu/nvidia-cdi-hook");
  const cdi::Hook* links = FindHook(edits, "create-symlinks");
  ASSERT_NE(links, nullptr);
  EXPECT_TRUE(Has(links->args, "libcuda.so.570.1::/usr/lib64/libcuda.so.1"));
  for (size_t i = 2; i < links->args.size(); ++i) {
    if (links->args[i] == "--link") continue;
    const std::string& a = links->args[i];
    auto first = a.find("::");
    ASSERT_NE(first, std::string::npos) << a;
    EXPECT_EQ(a.find("::", first + 2), std::string::npos) << "ambiguous link argument " << a;
  }
}

TEST(DriverFilesTest, HooksInTheToolkitsOrderAndNoneWithoutABinary) {
  nvdra::testing::TempDir tmp;
  Tree t(tmp.path());
  t.Lib("/usr/lib64", "libcuda", "1", "570.1", true);
  t.WriteCache();
  auto files = DiscoverDriverFiles(DriverRoot(t.root(), "/"), "570.1");
  ASSERT_TRUE(files.ok());
  auto edits = files->Edits("/opt/hooks/nvidia-cdi-hook");
  ASSERT_EQ(edits.hooks.size(), 4u);
  std::vector<std::string> names;
  for (const auto& h : edits.hooks) {
    EXPECT_EQ(h.hook_name, "createContainer");
    EXPECT_EQ(h.path, "/opt/hooks/nvidia-cdi-hook");
    EXPECT_EQ(h.args[0], "nvidia-cdi-hook");
    EXPECT_EQ(h.env, std::vector<std::string>{"NVIDIA_CTK_DEBUG=false"});
    names.push_back(h.args[1]);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"create-symlinks", "enable-cuda-compat", "update-ldcache",
                                             "disable-device-node-modification"}));
  EXPECT_EQ(edits.hooks[0].args, (std::vector<std::string>{"nvidia-cdi-hook", "create-symlinks", "--link",
                                                           "libcuda.so.1::/usr/lib64/libcuda.so", "--link",
                                                           "libcuda.so.570.1::/usr/lib64/libcuda.so.1"}));
  auto bare = files->Edits("");
  EXPECT_TRUE(bare.hooks.empty());
  EXPECT_EQ(bare.mounts, edits.mounts);
  EXPECT_EQ(bare.env, std::vector<std::string>{"NVIDIA_CTK_LIBCUDA_DIR=/usr/lib64"});
}

// As the toolkit's graphics discoverer: libnvidia-allocator brings GBM's
// backend link, in a create-symlinks hook of its own ahead of the libraries'
// links; the IMEX daemon and its control tool are driver binaries.
TEST(DriverFilesTest, GbmLinkAndImexBinariesAsTheToolkitWritesThem) {
  nvdra::testing::TempDir tmp;
  Tree t(tmp.path());
  t.Lib("/usr/lib64", "libcuda", "1", "570.1");
  t.Lib("/usr/lib64", "libnvidia-allocator", "1", "570.1");
  t.WriteCache();
  t.File("/usr/bin/nvidia-imex", 0755);
  t.File("/usr/bin/nvidia-imex-ctl", 0755);
  auto files = DiscoverDriverFiles(DriverRoot(t.root(), "/"), "570.1");
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  auto edits = files->Edits("/opt/hooks/nvidia-cdi-hook");
  ASSERT_EQ(edits.hooks.size(), 5u);
  EXPECT_EQ(edits.hooks[0].args,
            (std::vector<std::string>{"nvidia-cdi-hook", "create-symlinks", "--link",
                                      "../libnvidia-allocator.so.1::/usr/lib64/gbm/nvidia-drm_gbm.so"}));
  EXPECT_EQ(edits.hooks[1].args[1], "create-symlinks");
  std::vector<std::string> paths;
  for (const auto& m : edits.mounts) paths.push_back(m.container_path);
  for (const char* bin : {"/usr/bin/nvidia-imex", "/usr/bin/nvidia-imex-ctl"}) {
    EXPECT_NE(std::find(paths.begin(), paths.end(), bin), paths.end()) << bin;
  }
  // Without the allocator there is no GBM hook.
  nvdra::testing::TempDir tmp2;
  Tree t2(tmp2.path());
  t2.Lib("/usr/lib64", "libcuda", "1", "570.1");
  t2.WriteCache();
  auto plain = DiscoverDriverFiles(DriverRoot(t2.root(), "/"), "570.1");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->Edits("/opt/hooks/nvidia-cdi-hook").hooks.size(), 4u);
}

TEST(DriverFilesTest, CacheRefreshesWhenTheDriverChanges) {
  nvdra::testing::TempDir tmp;
  Tree t(tmp.path());
  t.Lib("/usr/lib64", "libcuda", "1", "550.1");
  std::string version = "550.1";
  int asked = 0;
  DriverFilesCache cache(
      DriverRoot(t.root(), "/"),
      [&]() -> Result<std::string> {
        asked++;
        return version;
      },
      "");
  auto a = cache.Files();
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->driver_version, "550.1");
  ASSERT_TRUE(cache.Files().ok());
  EXPECT_EQ(asked, 1) << "a steady driver is not asked again";
  // Upgrade: the old library goes, the new one comes, NVML reports it.
  ASSERT_EQ(::unlink((t.root() + "/usr/lib64/libcuda.so.550.1").c_str()), 0);
  ASSERT_EQ(::unlink((t.root() + "/usr/lib64/libcuda.so.1").c_str()), 0);
  t.Lib("/usr/lib64", "libcuda", "1", "570.2");
  version = "570.2";
  auto b = cache.CommonEdits();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(Has((*b)->env, "NVIDIA_CTK_LIBCUDA_DIR=/usr/lib64"));
  ASSERT_EQ((*b)->mounts.size(), 1u);
  EXPECT_EQ((*b)->mounts[0].container_path, "/usr/lib64/libcuda.so.570.2");
  EXPECT_EQ(asked, 2);
  // Built once per discovery: the next claim gets the same edits, not a copy.
  auto c = cache.CommonEdits();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->get(), b->get());
}

std::vector<std::string> MountedPaths(const cdi::ContainerEdits& e) {
  std::vector<std::string> out;
  for (const auto& m : e.mounts) out.push_back(m.container_path);
  return out;
}

// Under a steady driver the toolkit's DaemonSet may replace the hook, and a
// library may go or come: the next edits name what is there now, without
// asking the driver's version again, and what specs named and is gone is
// told once.
TEST(DriverFilesTest, CacheFollowsTheFilesAndTheHookUnderASteadyDriver) {
  nvdra::testing::TempDir tmp;
  Tree t(tmp.path() + "/root");
  t.Lib("/usr/lib64", "libcuda", "1", "550.1");
  t.Lib("/usr/lib64", "libnvidia-ptxjitcompiler", "1", "550.1");
  const std::string hook = tmp.path() + "/plugin/nvidia-cdi-hook";
  ASSERT_TRUE(MakeDirectories(tmp.path() + "/plugin", 0755).ok());
  ASSERT_TRUE(WriteFileAtomically(hook, "#!/bin/sh\nexit 0\n", 0755, false).ok());
  int asked = 0, installs = 0;
  DriverFilesCache cache(
      DriverRoot(t.root(), "/"), [&]() -> Result<std::string> { return ++asked, std::string("550.1"); }, hook,
      [&] {
        installs++;
        return WriteFileAtomically(hook, "#!/bin/sh\nexit 0\n", 0755, false);
      });
  auto a = cache.CommonEdits();
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(Has(MountedPaths(**a), "/usr/lib64/libnvidia-ptxjitcompiler.so.550.1"));
  const uint64_t first = cache.generation();
  ASSERT_TRUE(cache.CommonEdits().ok());
  EXPECT_EQ(cache.generation(), first) << "nothing changed: nothing discovered again";
  EXPECT_TRUE(cache.MissingFiles().empty());

  // A library removed: gone from the next edits, and told once.
  std::string ptx_host;
  for (const auto& m : (*a)->mounts) {
    if (m.container_path == "/usr/lib64/libnvidia-ptxjitcompiler.so.550.1") ptx_host = m.host_path;
  }
  ASSERT_EQ(::unlink((t.root() + "/usr/lib64/libnvidia-ptxjitcompiler.so.550.1").c_str()), 0);
  EXPECT_EQ(cache.MissingFiles(), std::vector<std::string>{ptx_host}) << "the edits held still name it";
  auto b = cache.CommonEdits();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_FALSE(Has(MountedPaths(**b), "/usr/lib64/libnvidia-ptxjitcompiler.so.550.1"));
  EXPECT_TRUE(Has(MountedPaths(**b), "/usr/lib64/libcuda.so.550.1"));
  EXPECT_GT(cache.generation(), first);
  EXPECT_EQ(cache.TakeGoneFiles(), std::vector<std::string>{ptx_host});
  EXPECT_TRUE(cache.TakeGoneFiles().empty());
  EXPECT_TRUE(cache.MissingFiles().empty());
  EXPECT_EQ(asked, 1) << "the driver's libcuda is still there: the same driver";

  // A library added comes with the next edits.
  t.Lib("/usr/lib64", "libnvidia-encode", "1", "550.1");
  auto c = cache.CommonEdits();
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(Has(MountedPaths(**c), "/usr/lib64/libnvidia-encode.so.550.1"));

  // The hook replaced (a new inode, as a new toolkit installs it): the
  // specs name its path, which holds the new binary; nothing is gone.
  uint64_t before = cache.generation();
  ASSERT_TRUE(WriteFileAtomically(hook, "#!/bin/sh\nexit 0 # v2\n", 0755, false).ok());
  auto d = cache.CommonEdits();
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(cache.generation(), before);
  ASSERT_FALSE((*d)->hooks.empty());
  EXPECT_EQ((*d)->hooks[0].path, hook);
  EXPECT_TRUE(cache.MissingFiles().empty());
  // The hook removed: put back before the edits name it again.
  ASSERT_EQ(::unlink(hook.c_str()), 0);
  ASSERT_TRUE(cache.CommonEdits().ok());
  EXPECT_EQ(installs, 1);
  EXPECT_TRUE(PathExists(hook));
  EXPECT_TRUE(cache.TakeGoneFiles().empty());
}

// A hook that is not the plugin's to install (the toolkit's, by the flag)
// and is gone is told, and named by the missing files until it is back.
TEST(DriverFilesTest, CacheTellsOfAToolkitHookThatIsGone) {
  nvdra::testing::TempDir tmp;
  Tree t(tmp.path() + "/root");
  t.Lib("/usr/lib64", "libcuda", "1", "550.1");
  const std::string hook = tmp.path() + "/toolkit/nvidia-cdi-hook";
  ASSERT_TRUE(MakeDirectories(tmp.path() + "/toolkit", 0755).ok());
  ASSERT_TRUE(WriteFileAtomically(hook, "#!/bin/sh\n", 0755, false).ok());
  DriverFilesCache cache(
      DriverRoot(t.root(), "/"), [] { return Result<std::string>(std::string("550.1")); }, hook);
  ASSERT_TRUE(cache.CommonEdits().ok());
  ASSERT_EQ(::unlink(hook.c_str()), 0);
  ASSERT_TRUE(cache.CommonEdits().ok());
  EXPECT_EQ(cache.TakeGoneFiles(), std::vector<std::string>{hook});
  EXPECT_EQ(cache.MissingFiles(), std::vector<std::string>{hook});
  const uint64_t gone = cache.generation();
  EXPECT_GT(gone, 1u) << "a file named is gone: the specs need a look";
  ASSERT_TRUE(cache.CommonEdits().ok());
  EXPECT_EQ(cache.generation(), gone) << "a hook that stays gone is no change";
  ASSERT_TRUE(WriteFileAtomically(hook, "#!/bin/sh\n", 0755, false).ok());
  ASSERT_TRUE(cache.CommonEdits().ok());
  EXPECT_TRUE(cache.MissingFiles().empty());
  EXPECT_TRUE(cache.TakeGoneFiles().empty());
}

TEST(DriverFilesTest, InstallCdiHook) {
  nvdra::testing::TempDir tmp;
  auto flag = InstallCdiHook("/host/bin/nvidia-cdi-hook", "/nonexistent", tmp.path());
  ASSERT_TRUE(flag.ok());
  EXPECT_EQ(*flag, "/host/bin/nvidia-cdi-hook") << "the flag wins, and nothing is copied";
  EXPECT_FALSE(PathExists(tmp.path() + "/nvidia-cdi-hook"));
  auto none = InstallCdiHook("", tmp.path() + "/missing-hook", tmp.path() + "/plugin");
  ASSERT_FALSE(none.ok()) << "no hook to copy and no flag: the plugin does not start";
  EXPECT_NE(none.status().message().find(tmp.path() + "/missing-hook"), std::string::npos) << none.status().message();
  EXPECT_NE(none.status().message().find("--nvidia-cdi-hook-path"), std::string::npos) << none.status().message();
  ASSERT_TRUE(WriteFileAtomically(tmp.path() + "/src-hook", "#!/bin/sh\nexit 0\n", 0700, false).ok());
  ASSERT_TRUE(MakeDirectories(tmp.path() + "/plugin", 0750).ok());
  auto copied = InstallCdiHook("", tmp.path() + "/src-hook", tmp.path() + "/plugin");
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  EXPECT_EQ(*copied, tmp.path() + "/plugin/nvidia-cdi-hook");
  struct stat st;
  ASSERT_EQ(::stat(copied->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  EXPECT_EQ(*ReadFileToString(*copied), "#!/bin/sh\nexit 0\n");
  // A new hook (an upgraded image) replaces the copy by a rename: a runtime
  // that opened the old copy keeps reading it whole, and no temporary file
  // is left beside the copy.
  int old_fd = ::open(copied->c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(old_fd, 0);
  ASSERT_TRUE(WriteFileAtomically(tmp.path() + "/src-hook", "#!/bin/sh\nexit 1\n", 0700, false).ok());
  ASSERT_TRUE(InstallCdiHook("", tmp.path() + "/src-hook", tmp.path() + "/plugin").ok());
  EXPECT_EQ(*ReadFileToString(*copied), "#!/bin/sh\nexit 1\n");
  char buf[64] = {};
  ASSERT_GT(::pread(old_fd, buf, sizeof buf - 1, 0), 0);
  EXPECT_STREQ(buf, "#!/bin/sh\nexit 0\n") << "the old copy was replaced, not rewritten in place";
  ::close(old_fd);
  ASSERT_EQ(::stat(copied->c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  auto entries = ListDirectory(tmp.path() + "/plugin");
  ASSERT_TRUE(entries.ok());
  EXPECT_EQ(entries->size(), 1u);
}

TEST(DriverFilesTest, TheShippedHookLiesBesideTheProgram) {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  ASSERT_GT(n, 0);
  std::string exe(buf, static_cast<size_t>(n));
  EXPECT_EQ(ShippedCdiHookPath(), exe.substr(0, exe.rfind('/')) + "/nvdra-cdi-hook");
}

TEST(DriverFilesTest, ResolveInRootStaysInTheRoot) {
  nvdra::testing::TempDir tmp;
  Tree t(tmp.path());
  t.File("/usr/lib64/real.so");
  t.Link("/lib64", "usr/lib64");
  t.Link("/usr/lib64/abs.so", "/lib64/real.so");
  t.Link("/usr/lib64/up.so", "../../../../../usr/lib64/real.so");
  EXPECT_EQ(*ResolveInRoot(t.root(), "/usr/lib64/abs.so"), "/usr/lib64/real.so");
  EXPECT_EQ(*ResolveInRoot(t.root(), "/usr/lib64/up.so"), "/usr/lib64/real.so");
  EXPECT_FALSE(ResolveInRoot(t.root(), "/usr/lib64/none.so").ok());
}

TEST(DriverFilesTest, DrmNodesByPciBusId) {
  nvdra::testing::TempDir tmp;
  Tree t(tmp.path());
  t.File("/dev/nvidiactl");  // the driver root's dev/ is the dev root
  t.File("/dev/dri/card1");
  t.File("/dev/dri/renderD128");
  t.Link("/dev/dri/by-path/pci-0000:3b:00.0-card", "../card1");
  t.Link("/dev/dri/by-path/pci-0000:3b:00.0-render", "../renderD128");
  t.Link("/dev/dri/by-path/pci-0000:5d:00.0-card", "../card9");  // node missing
  DriverRoot root(t.root(), "/run/nvidia/driver");
  DrmNodes drm = FindDrmNodes(root, "0000:3b:00.0");
  EXPECT_EQ(drm.nodes, (std::vector<std::string>{"/dev/dri/card1", "/dev/dri/renderD128"}));
  EXPECT_EQ(drm.links, (std::vector<std::string>{"../card1::/dev/dri/by-path/pci-0000:3b:00.0-card",
                                                 "../renderD128::/dev/dri/by-path/pci-0000:3b:00.0-render"}));
  EXPECT_TRUE(FindDrmNodes(root, "0000:5d:00.0").nodes.empty());
  EXPECT_TRUE(FindDrmNodes(root, "0000:99:00.0").nodes.empty());
}

TEST(DriverFilesTest, MissingContainerRootSaysToPassSlashOnTheHost) {
  nvdra::testing::TempDir tmp;
  auto files = DiscoverDriverFiles(DriverRoot(tmp.path() + "/driver-root", "/"), "570.1");
  ASSERT_FALSE(files.ok());
  EXPECT_EQ(files.status().code(), StatusCode::kNotFound);
  EXPECT_NE(files.status().message().find("--container-driver-root (DRIVER_ROOT_CTR_PATH) is " + tmp.path() +
                                          "/driver-root, which does not exist"),
            std::string::npos)
      << files.status().message();
  EXPECT_NE(files.status().message().find("running on the host, pass --container-driver-root /"), std::string::npos)
      << files.status().message();
}

std::string RunScript(const std::string& cmd, int* rc) {
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = ::pclose(p);
  *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

TEST(MockDriverInstallTest, DiscoveryFindsTheMockDriver) {
  nvdra::testing::TempDir tmp;
  auto profile = LoadMockProfile("h100x8");
  ASSERT_TRUE(profile.ok());
  auto lib = MockDeviceLib::Create(*profile, tmp.path());
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  auto files = DiscoverDriverFiles((*lib)->driver_root(), "570.158.01");
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  auto libs = ContainerPaths(files->libraries);
  for (const auto& name : MockDriverLibraries("570.158.01")) {
    std::string dir = name.rfind("libvdpau", 0) == 0 ? std::string(kMockLibDir) + "/vdpau" : kMockLibDir;
    EXPECT_TRUE(Has(libs, dir + "/" + name)) << name;
  }
  EXPECT_TRUE(Has(libs, std::string(kMockLibDir) + "/libnvidia-nvvm70.so.4"));
  EXPECT_TRUE(Has(libs, std::string(kMockLibDir) + "/libnvidia-egl-xcb.so.1"));
  // nvidia-smi, nvidia-debugdump, nvidia-persistenced, the two MPS
  // binaries and nvidia-imex-ctl (the mock ships no nvidia-imex).
  EXPECT_EQ(files->binaries.size(), 6u);
  EXPECT_EQ(files->firmware.size(), 2u);
  EXPECT_EQ(files->ipc.size(), 1u);
  // The mock is its own host root: host paths point into it.
  EXPECT_EQ(files->libraries[0].host_path, tmp.path() + files->libraries[0].container_path);
  // The mock ships no hook of its own: the plugins copy the real one.
  EXPECT_EQ((*lib)->cdi_hook_source(), ShippedCdiHookPath());
}

TEST(MockDriverInstallTest, NvidiaSmiListsTheGpusItSees) {
  nvdra::testing::TempDir tmp;
  auto profile = LoadMockProfile("a100-mig");
  ASSERT_TRUE(profile.ok());
  auto lib = MockDeviceLib::Create(*profile, tmp.path() + "/driver-root");
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  const auto& inv = profile->inventory;
  // A container's /dev holding only GPU 1 and the first MIG device of GPU 2.
  Tree dev(tmp.path() + "/ctr");
  dev.File("/dev/nvidia1");
  dev.File("/dev/nvidia2");
  const auto& m = inv.gpus[2].migs[0];
  dev.File("/dev/nvidia-caps/nvidia-cap" + std::to_string(MockDeviceLib::MigGiCapMinor(2, m.gi_id)));
  dev.File("/dev/nvidia-caps/nvidia-cap" + std::to_string(MockDeviceLib::MigCiCapMinor(2, m.gi_id, m.ci_id)));
  int rc = -1;
  std::string smi = tmp.path() + "/driver-root/usr/bin/nvidia-smi";
  std::string out = RunScript("NVDRA_MOCK_DEV_ROOT='" + tmp.path() + "/ctr' " + smi + " -L", &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(out, "GPU 0: NVIDIA A100-SXM4-40GB (UUID: " + inv.gpus[1].uuid + ")\n" +
                     "GPU 1: NVIDIA A100-SXM4-40GB (UUID: " + inv.gpus[2].uuid + ")\n" + "  MIG " + m.profile +
                     " Device 0: (UUID: " + m.uuid + ")\n");
  out = RunScript("NVDRA_MOCK_DEV_ROOT='" + tmp.path() + "/none' " + smi + " -L", &rc);
  EXPECT_EQ(rc, 6);
  EXPECT_EQ(out, "No devices were found\n");
}

}  // namespace
}  // namespace nvdra::devices
