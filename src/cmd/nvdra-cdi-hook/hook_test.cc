#include "cmd/nvdra-cdi-hook/hook.h"

#include <elf.h>
#include <gtest/gtest.h>
#include <link.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/test_paths.h"
#include "util/test_temp_dir.h"

namespace nvdra::cdihook {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

void Put(const std::string& path, const std::string& content) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << content;
}

// A bundle as a runtime lays it out: config.json naming "rootfs" relative
// to the bundle, and the state JSON the runtime writes to the hook's stdin.
struct Bundle {
  nvdra::testing::TempDir tmp{"nvdra-hook"};
  std::string bundle = tmp.path() + "/bundle";
  std::string root = bundle + "/rootfs";
  std::string host = tmp.path() + "/host";  // stands for host files
  Bundle() {
    fs::create_directories(root);
    fs::create_directories(host);
    Put(bundle + "/config.json", R"({"ociVersion":"1.0.2","root":{"path":"rootfs"},"process":{"args":["sh"]}})");
  }
  std::string State() const {
    return R"({"ociVersion":"1.0.2","id":"c1","status":"creating","pid":42,"bundle":")" + bundle + R"("})";
  }
  // Runs the hook as the runtime would; returns the exit status, `log`
  // gets what it wrote.
  int Run(std::vector<std::string> args, std::string* log = nullptr, const HostPaths& host_paths = HostPaths()) const {
    args.insert(args.begin(), "nvidia-cdi-hook");
    std::istringstream in(State());
    std::ostringstream out;
    int rc = RunHook(args, in, out, host_paths, [](const char*) -> std::optional<std::string> { return std::nullopt; });
    if (log) *log = out.str();
    return rc;
  }
  // Every file and link under the root with its content or target: two
  // runs must leave the same listing.
  std::string Listing() const {
    std::string out;
    std::vector<std::string> lines;
    for (auto& e : fs::recursive_directory_iterator(root)) {
      std::string rel = e.path().string().substr(root.size());
      if (e.is_symlink()) {
        lines.push_back(rel + " -> " + fs::read_symlink(e.path()).string());
      } else if (e.is_regular_file()) {
        lines.push_back(rel + " = " + Slurp(e.path()));
      } else {
        lines.push_back(rel + "/");
      }
    }
    std::sort(lines.begin(), lines.end());
    for (auto& l : lines) out += l + "\n";
    return out;
  }
};

TEST(ContainerRootPathTest, FromTheBundleConfig) {
  Bundle b;
  std::istringstream state(b.State());
  EXPECT_EQ(ContainerRootPath(state), b.root);
  Put(b.bundle + "/config.json", R"({"root":{"path":"/abs/rootfs","readonly":true}})");
  std::istringstream again(b.State());
  EXPECT_EQ(ContainerRootPath(again), "/abs/rootfs");
  std::istringstream with_root(R"({"bundle":")" + b.bundle + R"(","root":"/from/state"})");
  EXPECT_EQ(ContainerRootPath(with_root), "/from/state");
}

TEST(ContainerRootPathTest, Errors) {
  std::istringstream junk("not json");
  try {
    ContainerRootPath(junk);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("failed to load container state"), std::string::npos) << e.what();
  }
  std::istringstream nobundle(R"({"bundle":"/nonexistent-bundle"})");
  try {
    ContainerRootPath(nobundle);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-bundle/config.json"), std::string::npos) << e.what();
  }
}

TEST(CreateSymlinksTest, CreatesTheLinksIdempotently) {
  Bundle b;
  Put(b.root + "/usr/lib/x86_64-linux-gnu/libcuda.so.570.1", "elf");
  std::vector<std::string> args = {"create-symlinks",
                                   "--link",
                                   "libcuda.so.570.1::/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                                   "--link=libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so",
                                   "--link",
                                   "../card4::/dev/dri/by-path/pci-0000:3b:00.0-card"};
  std::string log;
  ASSERT_EQ(b.Run(args, &log), 0) << log;
  EXPECT_EQ(fs::read_symlink(b.root + "/usr/lib/x86_64-linux-gnu/libcuda.so.1"), "libcuda.so.570.1");
  EXPECT_EQ(fs::read_symlink(b.root + "/usr/lib/x86_64-linux-gnu/libcuda.so"), "libcuda.so.1");
  EXPECT_EQ(fs::read_symlink(b.root + "/dev/dri/by-path/pci-0000:3b:00.0-card"), "../card4");
  const std::string first = b.Listing();
  ASSERT_EQ(b.Run(args, &log), 0) << log;
  EXPECT_EQ(b.Listing(), first);
}

TEST(CreateSymlinksTest, AWrongLinkIsReplaced) {
  Bundle b;
  fs::create_directories(b.root + "/usr/lib64");
  fs::create_symlink("libcuda.so.1.old", b.root + "/usr/lib64/libcuda.so.1");
  ASSERT_EQ(b.Run({"create-symlinks", "--link", "libcuda.so.2::/usr/lib64/libcuda.so.1"}), 0);
  EXPECT_EQ(fs::read_symlink(b.root + "/usr/lib64/libcuda.so.1"), "libcuda.so.2");
}

TEST(CreateSymlinksTest, AHostileImageLinkIsNotFollowed) {
  Bundle b;
  // The image's library directory is a link to a host directory (by its
  // host path) and another one climbs out with "..".
  fs::create_directories(b.root + "/usr/lib");
  fs::create_symlink(b.host, b.root + "/usr/lib/x86_64-linux-gnu");
  fs::create_symlink("../../../../../../../../.." + b.host, b.root + "/usr/lib64");
  ASSERT_EQ(b.Run({"create-symlinks", "--link", "libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so", "--link",
                   "libcuda.so.1::/usr/lib64/libcuda.so"}),
            0);
  EXPECT_TRUE(fs::is_empty(b.host));
  EXPECT_EQ(fs::read_symlink(b.root + b.host + "/libcuda.so"), "libcuda.so.1");
}

TEST(CreateSymlinksTest, ArgumentErrors) {
  Bundle b;
  std::string log;
  EXPECT_EQ(b.Run({"create-symlinks", "--link", "no-separator"}, &log), 1);
  EXPECT_NE(log.find("invalid symlink specification no-separator"), std::string::npos) << log;
  EXPECT_EQ(b.Run({"create-symlinks", "--link", "a::b::c"}, &log), 1);
  EXPECT_EQ(b.Run({"create-symlinks", "--link"}, &log), 1);
  EXPECT_NE(log.find("flag needs an argument"), std::string::npos) << log;
  EXPECT_EQ(b.Run({"create-symlinks", "--target", "x"}, &log), 1);
  EXPECT_NE(log.find("flag provided but not defined: -target"), std::string::npos) << log;
  EXPECT_EQ(b.Run({"create-symlinks", "stray"}, &log), 1);
  EXPECT_NE(log.find("unexpected argument stray"), std::string::npos) << log;
  EXPECT_TRUE(fs::is_empty(b.root)) << "nothing made on an error";
}

TEST(RunHookTest, UnknownOrMissingHookIsAWarning) {
  Bundle b;
  std::string log;
  // As the toolkit's hook: a spec naming a hook this build lacks must not
  // fail the container.
  EXPECT_EQ(b.Run({"update-application-profile", "--foo"}, &log), 0);
  EXPECT_NE(log.find("level=warning"), std::string::npos) << log;
  EXPECT_EQ(b.Run({}, &log), 0);
  EXPECT_EQ(b.Run({"--bogus-global"}, &log), 1);
  EXPECT_EQ(b.Run({"noop"}, &log), 0);
}

TEST(EnableCudaCompatTest, CompatLibrariesOfANewerMajorComeFirst) {
  Bundle b;
  Put(b.root + "/usr/local/cuda-12.9/compat/libcuda.so.575.57.08", "elf");
  fs::create_symlink("cuda-12.9", b.root + "/usr/local/cuda");
  std::string log;
  ASSERT_EQ(b.Run({"enable-cuda-compat", "--host-driver-version=570.158.01"}, &log), 0) << log;
  EXPECT_EQ(Slurp(b.root + kCompatDropIn), "/usr/local/cuda-12.9/compat\n");
  const std::string first = b.Listing();
  ASSERT_EQ(b.Run({"enable-cuda-compat", "--host-driver-version", "570.158.01"}, &log), 0) << log;
  EXPECT_EQ(b.Listing(), first);
}

TEST(EnableCudaCompatTest, NoCompatWhenTheHostIsNewOrNothingToCompare) {
  Bundle b;
  Put(b.root + "/usr/local/cuda/compat/libcuda.so.575.57.08", "elf");
  ASSERT_EQ(b.Run({"enable-cuda-compat", "--host-driver-version=575.1.2"}), 0);
  ASSERT_EQ(b.Run({"enable-cuda-compat", "--host-driver-version=580.65.06"}), 0);
  ASSERT_EQ(b.Run({"enable-cuda-compat", "--host-driver-version=not-a-version"}), 0);
  ASSERT_EQ(b.Run({"enable-cuda-compat", "--host-cuda-version=12.4"}), 0);
  ASSERT_EQ(b.Run({"enable-cuda-compat"}), 0);
  EXPECT_FALSE(fs::exists(b.root + kCompatDropIn));
  Bundle none;
  ASSERT_EQ(none.Run({"enable-cuda-compat", "--host-driver-version=470.1"}), 0);
  EXPECT_FALSE(fs::exists(none.root + "/etc"));
  std::string log;
  EXPECT_EQ(b.Run({"enable-cuda-compat", "--host-driver-version=1", "--host-driver-version=2"}, &log), 1);
}

TEST(DisableDeviceNodeModificationTest, Params) {
  EXPECT_EQ(ParamsWithoutDeviceModification("ResmanDebugLevel: 4294967295\nModifyDeviceFiles: 1\nX: 2\n"),
            "ResmanDebugLevel: 4294967295\nModifyDeviceFiles: 0\nX: 2\n");
  EXPECT_EQ(ParamsWithoutDeviceModification("ModifyDeviceFiles: 0\n"), "");
  EXPECT_EQ(ParamsWithoutDeviceModification("X: 1\n"), "");
}

TEST(DisableDeviceNodeModificationTest, NoParamsOnTheHostIsANoOp) {
  Bundle b;
  HostPaths h;
  h.driver_params = b.host + "/missing-params";
  std::string log;
  EXPECT_EQ(b.Run({"disable-device-node-modification"}, &log, h), 0) << log;
  EXPECT_TRUE(fs::is_empty(b.root));
}

// Runs `fn` in a child in a mount namespace of its own (the hook mounts);
// returns the child's exit status (0: every check passed).
template <typename F>
int InPrivateMounts(F fn) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_PRIVATE | MS_REC, nullptr) != 0) _exit(99);
    _exit(fn());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

int CountMounts(const std::string& under) {
  std::ifstream f("/proc/self/mountinfo");
  int n = 0;
  for (std::string line; std::getline(f, line);) n += line.find(under) != std::string::npos;
  return n;
}

TEST(DisableDeviceNodeModificationTest, MountsTheModifiedParamsOnce) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounts need root";
  Bundle b;
  Put(b.host + "/params", "ResmanDebugLevel: 4294967295\nModifyDeviceFiles: 1\n");
  Put(b.root + "/proc/driver/nvidia/params", "ResmanDebugLevel: 4294967295\nModifyDeviceFiles: 1\n");
  HostPaths h;
  h.driver_params = b.host + "/params";
  int rc = InPrivateMounts([&] {
    if (b.Run({"disable-device-node-modification"}, nullptr, h) != 0) return 1;
    if (Slurp(b.root + "/proc/driver/nvidia/params") != "ResmanDebugLevel: 4294967295\nModifyDeviceFiles: 0\n")
      return 2;
    int mounts = CountMounts(b.root);
    if (mounts != 2) return 3;  // the scratch tmpfs and the params file
    if (b.Run({"disable-device-node-modification"}, nullptr, h) != 0) return 4;
    if (CountMounts(b.root) != mounts) return 5;  // a second run changes nothing
    if (Slurp(b.host + "/params").find("ModifyDeviceFiles: 1") == std::string::npos) return 6;
    return 0;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(CountMounts(b.root), 0) << "the mounts stayed in the child's namespace";
}

TEST(ChmodTest, InsideTheRootOnly) {
  Bundle b;
  Put(b.root + "/dev/shm-dir/x", "");
  Put(b.host + "/victim", "");
  fs::permissions(b.host + "/victim", fs::perms(0644));
  fs::create_symlink(b.host + "/victim", b.root + "/victim-link");
  std::string log;
  ASSERT_EQ(b.Run({"chmod", "--mode", "1777", "--path", "/dev/shm-dir", "--path", "/victim-link", "--path", "/nope"},
                  &log),
            0)
      << log;
  EXPECT_EQ(fs::status(b.root + "/dev/shm-dir").permissions() & fs::perms::mask, fs::perms(01777));
  EXPECT_EQ(fs::status(b.host + "/victim").permissions() & fs::perms::mask, fs::perms(0644));
  EXPECT_EQ(b.Run({"chmod", "--path", "/x"}, &log), 1);
  EXPECT_NE(log.find("a non-empty mode must be specified"), std::string::npos) << log;
  EXPECT_EQ(b.Run({"chmod", "--mode", "9", "--path", "/x"}, &log), 1);
}

// Whether `path` is an ELF program without an interpreter (static).
bool IsStaticElf(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  ElfW(Ehdr) eh;
  if (!f.read(reinterpret_cast<char*>(&eh), sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) return false;
  for (int i = 0; i < eh.e_phnum; i++) {
    ElfW(Phdr) ph;
    f.seekg(static_cast<std::streamoff>(eh.e_phoff + static_cast<size_t>(i) * eh.e_phentsize));
    if (!f.read(reinterpret_cast<char*>(&ph), sizeof ph)) return false;
    if (ph.p_type == PT_INTERP) return false;
  }
  return true;
}

// The host's ldconfig (the hook's default) when it is a static program.
bool HaveStaticLdconfig() { return IsStaticElf("/sbin/ldconfig"); }

// The path of the C library this test runs with: a real shared object
// with a soname for ldconfig to find.
std::string LibcPath() {
  std::string found;
  ::dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* out) {
        std::string name = info->dlpi_name ? info->dlpi_name : "";
        if (name.find("/libc.so.6") != std::string::npos) *static_cast<std::string*>(out) = name;
        return 0;
      },
      &found);
  return found;
}

std::string CacheListing(const std::string& cache) {
  std::string cmd = "/sbin/ldconfig -p -C " + cache + " 2>&1";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  ::pclose(p);
  return out;
}

TEST(UpdateLdcacheTest, FoldersGoIntoTheContainersCache) {
  if (::geteuid() != 0) GTEST_SKIP() << "namespaces and pivot_root need root";
  if (!HaveStaticLdconfig()) GTEST_SKIP() << "no static /sbin/ldconfig on this host";
  const std::string libc = LibcPath();
  ASSERT_FALSE(libc.empty());
  Bundle b;
  fs::create_directories(b.root + "/opt/nv/lib");
  fs::copy_file(libc, b.root + "/opt/nv/lib/libc-copy.so");
  // The image's ld.so.conf.d is a link to a host directory by its host path.
  fs::create_directories(b.root + "/etc");
  fs::create_symlink(b.host, b.root + "/etc/ld.so.conf.d");
  struct stat host_cache_before {};
  ::stat("/etc/ld.so.cache", &host_cache_before);
  std::string log;
  ASSERT_EQ(b.Run({"update-ldcache", "--folder", "/opt/nv/lib", "--folder", "/usr/lib"}, &log), 0) << log;
  EXPECT_TRUE(fs::is_empty(b.host)) << "the host directory the image links to is untouched";
  EXPECT_EQ(Slurp(b.root + "/etc/ld.so.conf"), "include /etc/ld.so.conf.d/*.conf\n");
  EXPECT_EQ(Slurp(b.root + b.host + "/00-nvcr-nvdra.conf"), "/opt/nv/lib\n") << "/usr/lib is a system directory";
  EXPECT_NE(Slurp(b.root + b.host + "/zz-nvcr-nvdra.conf").find("/usr/lib\n"), std::string::npos);
  EXPECT_EQ(fs::read_symlink(b.root + "/opt/nv/lib/libc.so.6"), "libc-copy.so") << "ldconfig ran in the root";
  const std::string cache = CacheListing(b.root + "/etc/ld.so.cache");
  EXPECT_NE(cache.find("libc.so.6 (libc6"), std::string::npos) << cache;
  EXPECT_NE(cache.find("=> /opt/nv/lib/libc.so.6"), std::string::npos) << cache;
  struct stat host_cache_after {};
  ::stat("/etc/ld.so.cache", &host_cache_after);
  EXPECT_EQ(host_cache_before.st_mtim.tv_sec, host_cache_after.st_mtim.tv_sec);
  EXPECT_EQ(host_cache_before.st_mtim.tv_nsec, host_cache_after.st_mtim.tv_nsec);

  const std::string first = b.Listing();
  ASSERT_EQ(b.Run({"update-ldcache", "--folder", "/opt/nv/lib", "--folder", "/usr/lib"}, &log), 0) << log;
  // The cache file is rewritten byte for byte the same; nothing else moves.
  EXPECT_EQ(b.Listing(), first);
}

TEST(UpdateLdcacheTest, Errors) {
  Bundle b;
  std::string log;
  EXPECT_EQ(b.Run({"update-ldcache", "--folder", "/x", "--ldconfig-path", "/nonexistent/ldconfig"}, &log), 1);
  EXPECT_NE(log.find("/nonexistent/ldconfig"), std::string::npos) << log;
  EXPECT_EQ(b.Run({"update-ldcache", "--ldconfig-path="}, &log), 1);
  EXPECT_NE(log.find("ldconfig-path must be specified"), std::string::npos) << log;
  // A dynamically linked ldconfig would run the image's loader and libc.
  EXPECT_EQ(b.Run({"update-ldcache", "--folder", "/x", "--ldconfig-path", "/bin/sh"}, &log), 1);
  EXPECT_NE(log.find("dynamically linked"), std::string::npos) << log;
}

TEST(HookProgramTest, IsStaticAndReadsTheStateFromStdin) {
  const std::string bin = std::string(NVDRA_BIN_DIR) + "/nvdra-cdi-hook";
  ASSERT_TRUE(fs::exists(bin)) << bin;
  EXPECT_TRUE(IsStaticElf(bin)) << "no ELF interpreter: a static program";
  EXPECT_FALSE(IsStaticElf("/bin/sh")) << "the check tells a dynamic program";
  Bundle b;
  Put(b.tmp.path() + "/state.json", b.State());
  std::string cmd = bin + " create-symlinks --link libcuda.so.1::/usr/lib64/libcuda.so < " + b.tmp.path() +
                    "/state.json";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_EQ(fs::read_symlink(b.root + "/usr/lib64/libcuda.so"), "libcuda.so.1");
  std::string bad = bin + " create-symlinks --link bad < " + b.tmp.path() + "/state.json 2>/dev/null";
  int status = std::system(bad.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1);
}

}  // namespace
}  // namespace nvdra::cdihook
