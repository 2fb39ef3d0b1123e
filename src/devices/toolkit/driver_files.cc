#include "devices/toolkit/driver_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "devices/toolkit/ld_cache.h"
#include "util/file_util.h"
#include "util/log.h"

namespace nvdra::devices {

namespace {

const std::vector<std::string> kLibraryMountOptions = {"ro", "nosuid", "nodev", "rbind", "rprivate"};
const std::vector<std::string> kIpcMountOptions = {"nosuid", "nodev", "rbind", "rprivate", "noexec"};

// Where the toolkit looks for driver libraries when the cache does not name them.
const std::vector<std::string>& LibrarySearchDirs() {
  static const std::vector<std::string> dirs = {"/usr/lib64",
                                                "/usr/lib/x86_64-linux-gnu",
                                                "/usr/lib/aarch64-linux-gnu",
                                                "/usr/lib/x86_64-linux-gnu/nvidia/current",
                                                "/usr/lib/aarch64-linux-gnu/nvidia/current",
                                                "/lib64",
                                                "/lib/x86_64-linux-gnu",
                                                "/lib/aarch64-linux-gnu",
                                                "/lib/x86_64-linux-gnu/nvidia/current",
                                                "/lib/aarch64-linux-gnu/nvidia/current"};
  return dirs;
}

// Unversioned libraries the toolkit mounts explicitly (its
// getExplicitDriverLibraryMounts list), looked up in the driver's library
// directories, symlinks resolved.
const std::vector<std::string>& ExplicitLibraries() {
  static const std::vector<std::string> libs = {"libEGL.so",
                                                "libGL.so",
                                                "libGLESv1_CM.so",
                                                "libGLESv2.so",
                                                "libGLX.so",
                                                "libGLdispatch.so",
                                                "libOpenCL.so",
                                                "libOpenGL.so",
                                                "libnvidia-api.so",
                                                "libnvidia-egl-xcb.so",
                                                "libnvidia-egl-xlib.so"};
  return libs;
}

// The toolkit's newDriverBinariesDiscoverer list, the IMEX daemon and its
// control tool included (an IMEX daemon's container and the workloads that
// ask it about their domain run them).
const std::vector<std::string>& Binaries() {
  static const std::vector<std::string> bins = {
      "nvidia-smi",  "nvidia-debugdump", "nvidia-persistenced", "nvidia-cuda-mps-control", "nvidia-cuda-mps-server",
      "nvidia-imex", "nvidia-imex-ctl"};
  return bins;
}

std::string Dirname(const std::string& p) {
  auto slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return p.substr(0, slash);
}

std::string Basename(const std::string& p) {
  auto slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

bool Glob(const std::string& pattern, const std::string& name) {
  return ::fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

bool IsRegularFile(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool IsSymlink(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

// The toolkit's isLibName: "lib?*.so*" where what follows ".so" is empty or
// starts with ".".
bool IsLibName(const std::string& path) {
  std::string base = Basename(path);
  if (!Glob("lib?*.so*", base)) return false;
  auto pos = base.rfind(".so");
  std::string rest = base.substr(pos + 3);
  return rest.empty() || rest.front() == '.';
}

// "libcuda.so.1" -> "libcuda.so"; "" when there is no ".so" suffix part.
std::string SoLink(const std::string& name) {
  std::string n = name;
  while (true) {
    auto dot = n.rfind('.');
    if (dot == std::string::npos || dot == 0) return "";
    std::string ext = n.substr(dot);
    if (ext == ".so") return n;
    n = n.substr(0, dot);
  }
}

// Sorted names of a directory; empty when it cannot be read.
std::vector<std::string> DirEntries(const std::string& dir) {
  auto names = ListDirectory(dir);
  return names.ok() ? *names : std::vector<std::string>{};
}

class Finder {
 public:
  Finder(std::string root, const DriverRoot& driver_root) : root_(std::move(root)), driver_root_(driver_root) {}

  // Container view of an in-root path.
  std::string Abs(const std::string& in_root) const { return root_ == "/" ? in_root : root_ + in_root; }
  std::string Host(const std::string& in_root) const {
    const std::string& h = driver_root_.host_root();
    return h == "/" ? in_root : h + in_root;
  }

  // Resolves an in-root path to a regular file; "" when it is missing, a
  // directory, a dangling link or a loop.
  std::string RegularFile(const std::string& in_root) const {
    auto r = ResolveInRoot(root_, in_root);
    if (!r.ok() || !IsRegularFile(Abs(*r))) return "";
    return *r;
  }

  cdi::Mount FileMount(const std::string& in_root_path, const std::string& container_path,
                       const std::vector<std::string>& options) const {
    return cdi::Mount{Host(in_root_path), container_path, options, ""};
  }

 private:
  std::string root_;
  const DriverRoot& driver_root_;
};

// Strings in the order first added, each once; empty ones are dropped.
class OrderedSet {
 public:
  void Add(const std::string& s) {
    if (!s.empty() && seen_.insert(s).second) items_.push_back(s);
  }
  const std::vector<std::string>& items() const { return items_; }

 private:
  std::vector<std::string> items_;
  std::set<std::string> seen_;
};

// The steps of DiscoverDriverFiles, in the order it runs them.

Status CheckVersionNamesFiles(const std::string& version) {
  if (version.empty() || version.find_first_of("*/") != std::string::npos) {
    return InvalidArgument("driver version \"" + version + "\" cannot name driver files");
  }
  return Status::Ok();
}

// The driver root as this process sees it, a symlink resolved.
Result<std::string> RealDriverRoot(const DriverRoot& driver_root) {
  char resolved[PATH_MAX];
  if (::realpath(driver_root.container_root().c_str(), resolved) == nullptr) {
    const int err = errno;
    if (std::string hint = driver_root.MissingRootHint(); !hint.empty()) return NotFound("driver files: " + hint);
    return NotFound("driver root " + driver_root.container_root() + ": " + ErrnoText(err) +
                    " (check --container-driver-root)");
  }
  return std::string(resolved);
}

// Versioned libraries the driver root's ld.so.cache names (the toolkit's
// source of truth); a cache that cannot be read is skipped.
void AddCachedLibraries(const Finder& f, const std::string& suffix_glob, OrderedSet& libs) {
  auto cache = ReadLdCache(f.Abs("/etc/ld.so.cache"));
  if (!cache.ok()) {
    if (cache.status().code() != StatusCode::kNotFound) {
      NVDRA_WARN("driver files: ignoring {}: {}", f.Abs("/etc/ld.so.cache"), cache.status().message());
    }
    return;
  }
  for (const auto& e : *cache) {
    if (!IsLdCache64Bit(e.flags) || e.path.empty() || e.path.front() != '/') continue;
    std::string file = f.RegularFile(e.path);
    if (file.empty()) continue;
    if (Glob(suffix_glob, Basename(file)) || Glob(suffix_glob, Basename(e.path))) libs.Add(file);
  }
}

// The directories the libraries found so far live in, in order; the usual
// library directories when there is no cache, or it knows no library of
// this version.
std::vector<std::string> LibraryScanDirs(const std::vector<std::string>& libs) {
  if (libs.empty()) return LibrarySearchDirs();
  std::vector<std::string> dirs;
  for (const auto& l : libs) {
    std::string d = Dirname(l);
    if (std::find(dirs.begin(), dirs.end(), d) == dirs.end()) dirs.push_back(d);
  }
  return dirs;
}

// Versioned libraries in `dirs` and their vdpau/ subdirectories, so a
// library the cache missed (ldconfig not rerun) is still found.
void AddScannedLibraries(const Finder& f, const std::vector<std::string>& dirs, const std::string& suffix_glob,
                         OrderedSet& libs) {
  for (const auto& dir : dirs) {
    for (const auto& d : {dir, dir + "/vdpau"}) {
      for (const auto& name : DirEntries(f.Abs(d))) {
        if (Glob(suffix_glob, name)) libs.Add(f.RegularFile(d + "/" + name));
      }
    }
  }
}

// NotFound unless libcuda or libnvidia-ml of `version` was found.
Status RequireCoreLibrary(const std::vector<std::string>& libs, const std::string& version, const std::string& root) {
  for (const auto& l : libs) {
    std::string b = Basename(l);
    if (b == "libcuda.so." + version || b == "libnvidia-ml.so." + version) return Status::Ok();
  }
  return NotFound("no libcuda.so." + version + " or libnvidia-ml.so." + version + " under driver root " + root +
                  " (is driver " + version + " installed there, and does NVML report the installed version?)");
}

// The directories holding the versioned libraries, in order (vdpau/ and
// the like kept out): NVIDIA_CTK_LIBCUDA_DIR.
std::vector<std::string> VersionedLibraryDirs(const std::vector<std::string>& libs, const std::string& version) {
  std::vector<std::string> dirs;
  for (const auto& l : libs) {
    if (Basename(l).find(".so." + version) == std::string::npos) continue;
    std::string d = Dirname(l);
    if (Basename(d) == "vdpau") continue;
    if (std::find(dirs.begin(), dirs.end(), d) == dirs.end()) dirs.push_back(d);
  }
  return dirs;
}

// The legacy NVVM library and the explicit unversioned set, in the driver's
// library directories (the first directory holding one wins).
void AddNvvmAndExplicitLibraries(const Finder& f, const std::vector<std::string>& library_dirs, OrderedSet& libs) {
  for (const auto& d : library_dirs) {
    for (const auto& name : DirEntries(f.Abs(d))) {
      if (Glob("libnvidia-nvvm70.so.*", name)) libs.Add(f.RegularFile(d + "/" + name));
    }
  }
  for (const auto& name : ExplicitLibraries()) {
    for (const auto& d : library_dirs) {
      std::string file = f.RegularFile(d + "/" + name);
      if (!file.empty()) {
        libs.Add(file);
        break;
      }
    }
  }
}

std::vector<cdi::Mount> LibraryMounts(const Finder& f, const std::vector<std::string>& libs) {
  std::vector<cdi::Mount> mounts;
  for (const auto& l : libs) mounts.push_back(f.FileMount(l, l, kLibraryMountOptions));
  return mounts;
}

// The soname link ldconfig made for library `name` in `dir`: a link in the
// same directory, named <stem>.so.<N>, pointing at it (the shortest such
// name); "" when there is none.
std::string SonameLink(const Finder& f, const std::string& dir, const std::string& name) {
  std::string stem = SoLink(name);
  if (stem.empty()) return "";
  std::string soname;
  for (const auto& entry : DirEntries(f.Abs(dir))) {
    if (entry == name || entry.rfind(stem + ".", 0) != 0 || !IsSymlink(f.Abs(dir + "/" + entry))) continue;
    char buf[PATH_MAX];
    ssize_t n = ::readlink(f.Abs(dir + "/" + entry).c_str(), buf, sizeof buf - 1);
    if (n <= 0 || Basename(std::string(buf, static_cast<size_t>(n))) != name) continue;
    if (soname.empty() || entry.size() < soname.size()) soname = entry;
  }
  return soname;
}

// One "--link <target>::<link>" argument of the create-symlinks hook. The
// hook splits at "::", so a name that holds "::" itself would be read as
// another link: such a file is skipped, with a warning, not linked wrongly.
void AddLink(OrderedSet& links, const std::string& target, const std::string& link) {
  if (target.find("::") != std::string::npos || link.find("::") != std::string::npos) {
    NVDRA_WARN("driver files: not linking {} to {}: a name with \"::\" cannot be passed to the CDI hook's "
               "create-symlinks",
               link, target);
    return;
  }
  links.Add(target + "::" + link);
}

// Links the toolkit's create-symlinks hook makes next to each library:
// its fixed extras, the soname link and the .so development link.
std::vector<std::string> LibrarySymlinks(const Finder& f, const std::vector<std::string>& libs) {
  OrderedSet links;
  for (const auto& l : libs) {
    std::string dir = Dirname(l), name = Basename(l);
    if (Glob("libcuda.so.*.*", name)) AddLink(links, "libcuda.so.1", dir + "/libcuda.so");
    if (Glob("libGLX_nvidia.so.*.*", name)) AddLink(links, name, dir + "/libGLX_indirect.so.0");
    if (Glob("libnvidia-opticalflow.so.*.*", name)) {
      AddLink(links, "libnvidia-opticalflow.so.1", dir + "/libnvidia-opticalflow.so");
    }
    if (!Glob("*.*.*", name)) continue;
    std::string soname = SonameLink(f, dir, name);
    if (!soname.empty()) AddLink(links, name, dir + "/" + soname);
    std::string so_target = soname.empty() ? name : soname;
    std::string so_link = SoLink(so_target);
    if (!so_link.empty() && so_link != so_target && IsSymlink(f.Abs(dir + "/" + so_link))) {
      AddLink(links, so_target, dir + "/" + so_link);
    }
  }
  return links.items();
}

// IPC sockets of the driver's daemons, and the MPS pipe directory.
std::vector<cdi::Mount> IpcMounts(const Finder& f, const std::string& root) {
  std::vector<cdi::Mount> mounts;
  for (const char* sock : {"/nvidia-persistenced/socket", "/nvidia-fabricmanager/socket"}) {
    for (const char* base : {"/run", "/var/run"}) {
      std::string p = std::string(base) + sock;
      auto r = ResolveInRoot(root, p);
      if (!r.ok()) continue;
      mounts.push_back(f.FileMount(*r, p, kIpcMountOptions));
      break;
    }
  }
  if (auto r = ResolveInRoot(root, "/tmp/nvidia-mps"); r.ok()) {
    mounts.push_back(f.FileMount(*r, "/tmp/nvidia-mps", kIpcMountOptions));
  }
  return mounts;
}

// The kernel's firmware search path, most specific first.
std::vector<std::string> FirmwareDirs() {
  std::vector<std::string> dirs;
  struct utsname u;
  std::string release = ::uname(&u) == 0 ? u.release : "";
  if (!release.empty()) dirs.push_back("/lib/firmware/updates/" + release);
  dirs.push_back("/lib/firmware/updates");
  if (!release.empty()) dirs.push_back("/lib/firmware/" + release);
  dirs.push_back("/lib/firmware");
  return dirs;
}

// GSP firmware: nvidia/<version>/gsp*.bin in the kernel's firmware paths,
// each file name once.
std::vector<cdi::Mount> FirmwareMounts(const Finder& f, const std::string& version) {
  std::vector<cdi::Mount> mounts;
  std::set<std::string> seen;
  for (const auto& d : FirmwareDirs()) {
    std::string dir = d + "/nvidia/" + version;
    for (const auto& name : DirEntries(f.Abs(dir))) {
      if (!Glob("gsp*.bin", name)) continue;
      std::string file = f.RegularFile(dir + "/" + name);
      if (file.empty() || !seen.insert(name).second) continue;
      mounts.push_back(f.FileMount(file, dir + "/" + name, kLibraryMountOptions));
    }
  }
  return mounts;
}

// Binaries, mounted where they were found (on the container's PATH).
std::vector<cdi::Mount> BinaryMounts(const Finder& f) {
  std::vector<cdi::Mount> mounts;
  for (const auto& bin : Binaries()) {
    for (const char* d : {"/usr/bin", "/usr/sbin", "/bin", "/sbin", "/opt/bin"}) {
      std::string p = std::string(d) + "/" + bin;
      std::string file = f.RegularFile(p);
      if (file.empty() || ::access(f.Abs(file).c_str(), X_OK) != 0) continue;
      mounts.push_back(f.FileMount(file, p, kLibraryMountOptions));
      break;
    }
  }
  return mounts;
}

}  // namespace

Result<std::string> ResolveInRoot(const std::string& root, const std::string& path) {
  std::vector<std::string> todo;  // components still to walk, last one on top
  auto push_path = [&todo](const std::string& p) {
    std::vector<std::string> parts;
    size_t i = 0;
    while (i <= p.size()) {
      size_t j = p.find('/', i);
      if (j == std::string::npos) j = p.size();
      if (j > i) parts.push_back(p.substr(i, j - i));
      i = j + 1;
    }
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) todo.push_back(*it);
  };
  push_path(path);
  std::string cur;  // resolved so far, "" is the root
  int links = 0;
  while (!todo.empty()) {
    std::string comp = todo.back();
    todo.pop_back();
    if (comp == ".") continue;
    if (comp == "..") {
      auto slash = cur.rfind('/');
      cur = slash == std::string::npos ? "" : cur.substr(0, slash);
      continue;
    }
    std::string next = cur + "/" + comp;
    std::string full = root == "/" ? next : root + next;
    struct stat st;
    if (::lstat(full.c_str(), &st) != 0) return NotFound(full + ": " + ErrnoText(errno));
    if (!S_ISLNK(st.st_mode)) {
      cur = next;
      continue;
    }
    if (++links > 40) return FailedPrecondition(full + ": too many levels of symbolic links");
    char buf[PATH_MAX];
    ssize_t n = ::readlink(full.c_str(), buf, sizeof buf - 1);
    if (n < 0) return NotFound(full + ": " + ErrnoText(errno));
    std::string target(buf, static_cast<size_t>(n));
    if (!target.empty() && target.front() == '/') cur = "";
    push_path(target);
  }
  return cur.empty() ? std::string("/") : cur;
}

cdi::Hook CdiHook(const std::string& hook_path, const std::string& name, std::vector<std::string> args) {
  cdi::Hook h;
  h.hook_name = "createContainer";
  h.path = hook_path;
  h.args = {Basename(hook_path), name};
  h.args.insert(h.args.end(), args.begin(), args.end());
  h.env = {"NVIDIA_CTK_DEBUG=false"};
  return h;
}

Result<DriverFiles> DiscoverDriverFiles(const DriverRoot& driver_root, const std::string& version) {
  NVDRA_RETURN_IF_ERROR(CheckVersionNamesFiles(version));
  NVDRA_ASSIGN_OR_RETURN(const std::string root, RealDriverRoot(driver_root));
  Finder f(root, driver_root);
  const std::string suffix_glob = "*.so." + version;
  OrderedSet libs;  // in-root paths of regular files
  AddCachedLibraries(f, suffix_glob, libs);
  AddScannedLibraries(f, LibraryScanDirs(libs.items()), suffix_glob, libs);
  NVDRA_RETURN_IF_ERROR(RequireCoreLibrary(libs.items(), version, root));
  DriverFiles out;
  out.driver_version = version;
  out.library_dirs = VersionedLibraryDirs(libs.items(), version);
  AddNvvmAndExplicitLibraries(f, out.library_dirs, libs);
  out.libraries = LibraryMounts(f, libs.items());
  out.symlinks = LibrarySymlinks(f, libs.items());
  out.ipc = IpcMounts(f, root);
  out.firmware = FirmwareMounts(f, version);
  out.binaries = BinaryMounts(f);
  return out;
}

cdi::ContainerEdits DriverFiles::Edits(const std::string& hook_path) const {
  cdi::ContainerEdits e;
  std::string dirs;
  for (const auto& d : library_dirs) dirs += (dirs.empty() ? "" : ":") + d;
  e.env.push_back("NVIDIA_CTK_LIBCUDA_DIR=" + dirs);
  for (const auto* list : {&libraries, &ipc, &firmware, &binaries}) {
    e.mounts.insert(e.mounts.end(), list->begin(), list->end());
  }
  if (hook_path.empty()) return e;
  // The toolkit's graphics libraries come before its driver files and bring
  // links of their own: GBM finds the NVIDIA backend as
  // gbm/nvidia-drm_gbm.so next to libnvidia-allocator, and the Vulkan
  // producer is opened by its unversioned name.
  std::vector<std::string> graphics_links;
  for (const auto& m : libraries) {
    const std::string dir = Dirname(m.container_path);
    const std::string name = Basename(m.container_path);
    if (Glob("libnvidia-allocator.so.*.*", name)) {
      graphics_links.push_back("--link");
      graphics_links.push_back("../libnvidia-allocator.so.1::" + dir + "/gbm/nvidia-drm_gbm.so");
    } else if (Glob("libnvidia-vulkan-producer.so.*.*", name)) {
      graphics_links.push_back("--link");
      graphics_links.push_back(name + "::" + dir + "/libnvidia-vulkan-producer.so");
    }
  }
  if (!graphics_links.empty()) e.hooks.push_back(CdiHook(hook_path, "create-symlinks", std::move(graphics_links)));
  if (!symlinks.empty()) {
    std::vector<std::string> args;
    for (const auto& s : symlinks) {
      args.push_back("--link");
      args.push_back(s);
    }
    e.hooks.push_back(CdiHook(hook_path, "create-symlinks", std::move(args)));
  }
  e.hooks.push_back(CdiHook(hook_path, "enable-cuda-compat", {"--host-driver-version=" + driver_version}));
  std::vector<std::string> folders;
  for (const auto& m : libraries) {
    if (!IsLibName(m.container_path)) continue;
    std::string d = Dirname(m.container_path);
    if (std::find(folders.begin(), folders.end(), d) == folders.end()) folders.push_back(d);
  }
  if (!folders.empty()) {
    std::vector<std::string> args;
    for (const auto& d : folders) {
      args.push_back("--folder");
      args.push_back(d);
    }
    e.hooks.push_back(CdiHook(hook_path, "update-ldcache", std::move(args)));
  }
  e.hooks.push_back(CdiHook(hook_path, "disable-device-node-modification", {}));
  return e;
}

DrmNodes FindDrmNodes(const DriverRoot& root, const std::string& pci_bus_id) {
  DrmNodes out;
  const DriverRoot::DevRoot dev = root.LookUpDevRoot();  // one look for all four paths
  for (const char* kind : {"card", "render"}) {
    std::string link = "/dev/dri/by-path/pci-" + pci_bus_id + "-" + kind;
    std::string full = dev.ContainerPath(link);
    char buf[PATH_MAX];
    ssize_t n = ::readlink(full.c_str(), buf, sizeof buf - 1);
    if (n <= 0) continue;
    std::string target(buf, static_cast<size_t>(n));
    std::string node = "/dev/dri/" + Basename(target);
    struct stat st;
    if (::stat(dev.ContainerPath(node).c_str(), &st) != 0) continue;
    out.nodes.push_back(node);
    out.links.push_back(target + "::" + link);
  }
  return out;
}

static int64_t NanoTime(const struct timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec; }

DriverFilesCache::DriverFilesCache(DriverRoot root, VersionSource version_source, std::string hook_path,
                                   HookInstaller reinstall_hook)
    : root_(std::move(root)),
      version_source_(std::move(version_source)),
      hook_path_(std::move(hook_path)),
      reinstall_hook_(std::move(reinstall_hook)) {}

DriverFilesCache::Stamp DriverFilesCache::Look(const std::string& path) {
  Stamp s;
  s.path = path;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return s;
  s.exists = true;
  s.dev = st.st_dev;
  s.ino = st.st_ino;
  s.mtime_ns = NanoTime(st.st_mtim);
  s.ctime_ns = NanoTime(st.st_ctim);
  return s;
}

// Look(s.path) == s, without a copy of the path: this runs for every claim.
bool DriverFilesCache::Unchanged(const Stamp& s) {
  struct stat st;
  if (::stat(s.path.c_str(), &st) != 0) return !s.exists;
  return s.exists && s.dev == st.st_dev && s.ino == st.st_ino && s.mtime_ns == NanoTime(st.st_mtim) &&
         s.ctime_ns == NanoTime(st.st_ctim);
}

std::string DriverFilesCache::InRoot(const std::string& container_path) const {
  return base_ == "/" ? container_path : base_ + container_path;
}

// The directories holding the named files (a file removed, added or
// renamed there changes the directory's mtime) and the hook itself (a new
// binary is a new inode or ctime). A stamp of "" that exists never matches
// a look: discovery again at the next call.
std::vector<DriverFilesCache::Stamp> DriverFilesCache::StampsLocked() const {
  std::set<std::string> dirs;
  for (const auto* list : {&files_.libraries, &files_.ipc, &files_.firmware, &files_.binaries}) {
    for (const auto& m : *list) dirs.insert(InRoot(Dirname(m.container_path)));
  }
  std::vector<Stamp> out;
  for (const auto& d : dirs) out.push_back(Look(d));
  if (!hook_path_.empty()) out.push_back(Look(hook_path_));
  return out;
}

std::vector<std::string> DriverFilesCache::MissingLocked() const {
  std::vector<std::string> out;
  if (!have_) return out;
  for (const auto* list : {&files_.libraries, &files_.ipc, &files_.firmware, &files_.binaries}) {
    for (const auto& m : *list) {
      if (!PathExists(InRoot(m.container_path))) out.push_back(m.host_path);
    }
  }
  if (hook_seen_ && !PathExists(hook_path_)) out.push_back(hook_path_);
  return out;
}

Status DriverFilesCache::RefreshLocked() {
  if (have_) {
    bool same = true;
    for (const auto& s : stamps_) same = same && Unchanged(s);
    if (same) return Status::Ok();
  }
  if (reinstall_hook_ && !hook_path_.empty() && !PathExists(hook_path_)) {
    Status put = reinstall_hook_();
    if (put.ok()) NVDRA_WARN("the CDI hook {} was gone: installed it again", hook_path_);
    if (!put.ok()) NVDRA_WARN("the CDI hook {} is gone and cannot be installed again: {}", hook_path_, put.message());
  }
  std::string version = files_.driver_version;
  if (!have_ || probe_.empty() || !PathExists(probe_)) {
    auto asked = version_source_();
    if (!asked.ok()) return asked.status().Wrap("driver version");
    version = *asked;
  }
  auto files = DiscoverDriverFiles(root_, version);
  if (!files.ok()) return files.status().Wrap("discover driver files");
  Replace(std::move(files).value());
  return Status::Ok();
}

// The generation moves when the edits changed or a file they named is gone
// (a hook that is not ours to put back leaves the same edits).
void DriverFilesCache::Replace(DriverFiles files) {
  const size_t gone_before = gone_.size();
  for (const auto& path : MissingLocked()) {
    if (std::find(missing_.begin(), missing_.end(), path) != missing_.end()) continue;  // told already
    if (std::find(gone_.begin(), gone_.end(), path) == gone_.end()) gone_.push_back(path);
  }
  cdi::ContainerEdits edits = files.Edits(hook_path_);
  const bool changed = edits_ == nullptr || !(edits == *edits_);
  if (have_ && files.driver_version != files_.driver_version) {
    NVDRA_INFO("driver files: driver {} replaced {}; {} libraries", files.driver_version, files_.driver_version,
               files.libraries.size());
  } else if (have_ && changed) {
    NVDRA_INFO("driver files of driver {} changed (the driver's or the container toolkit's files replaced): {} "
               "libraries, hook {}",
               files.driver_version, files.libraries.size(), hook_path_.empty() ? "none" : hook_path_);
  }
  files_ = std::move(files);
  if (changed) edits_ = std::make_shared<const cdi::ContainerEdits>(std::move(edits));
  if (changed || gone_.size() > gone_before) generation_++;
  have_ = true;
  char resolved[PATH_MAX];
  base_ = ::realpath(root_.container_root().c_str(), resolved) ? resolved : root_.container_root();
  // Probe through the container view of the first library.
  probe_ = files_.libraries.empty() ? "" : InRoot(files_.libraries.front().container_path);
  hook_seen_ = hook_seen_ || (!hook_path_.empty() && PathExists(hook_path_));
  stamps_ = StampsLocked();
  missing_ = MissingLocked();
  if (LookAgainLocked()) stamps_.push_back(Stamp{"", true});
}

// Whether the stamps may miss a change: a file named is gone already (it
// went while it was discovered; a hook that is gone is in the stamps, and
// its return changes them), or a path changed so recently that a second
// change could carry the same time. Then the next call discovers again.
// Timestamps come from the kernel's coarse clock, a tick behind at most
// (10 ms at HZ=100): a change made 50 ms after the one stamped shows. A file
// system that keeps whole seconds (no nanoseconds in either time) can hide
// a change for two.
bool DriverFilesCache::LookAgainLocked() const {
  constexpr int64_t kSecond = 1000000000;
  struct timespec now;
  ::clock_gettime(CLOCK_REALTIME, &now);
  const int64_t now_ns = static_cast<int64_t>(now.tv_sec) * kSecond + now.tv_nsec;
  for (const auto& s : stamps_) {
    if (!s.exists) continue;
    const bool whole_seconds = s.mtime_ns % kSecond == 0 && s.ctime_ns % kSecond == 0;
    const int64_t window = whole_seconds ? 2 * kSecond : kSecond / 20;
    if (now_ns - std::max(s.mtime_ns, s.ctime_ns) < window) return true;
  }
  const bool hook_gone = hook_seen_ && !PathExists(hook_path_);
  return missing_.size() > (hook_gone ? 1u : 0u);
}

uint64_t DriverFilesCache::generation() {
  MutexLock l(mu_);
  return generation_;
}

std::vector<std::string> DriverFilesCache::TakeGoneFiles() {
  MutexLock l(mu_);
  std::vector<std::string> out;
  out.swap(gone_);
  return out;
}

std::vector<std::string> DriverFilesCache::MissingFiles() {
  MutexLock l(mu_);
  return MissingLocked();
}

Result<DriverFiles> DriverFilesCache::Files() {
  MutexLock l(mu_);
  NVDRA_RETURN_IF_ERROR(RefreshLocked());
  return files_;
}

Result<std::shared_ptr<const cdi::ContainerEdits>> DriverFilesCache::CommonEdits() {
  MutexLock l(mu_);
  NVDRA_RETURN_IF_ERROR(RefreshLocked());
  return edits_;
}

Result<std::string> InstallCdiHook(const std::string& flag_path, const std::string& source,
                                   const std::string& plugin_dir) {
  if (!flag_path.empty()) return flag_path;
  if (!IsRegularFile(source)) {
    return FailedPrecondition("no CDI hook to copy: " + source +
                              " does not exist (it ships beside the plugin) and --nvidia-cdi-hook-path "
                              "(NVIDIA_CDI_HOOK_PATH) is not set; set it to the node's nvidia-cdi-hook");
  }
  auto content = ReadFileToString(source);
  if (!content.ok()) return content.status().Wrap("read CDI hook " + source);
  std::string dest = JoinPath(plugin_dir, kCdiHookName);
  auto existing = ReadFileToString(dest);
  if (!existing.ok() || *existing != *content) {
    NVDRA_RETURN_IF_ERROR(WriteFileAtomically(dest, *content, 0755, true).Wrap("install CDI hook " + dest));
  }
  if (::chmod(dest.c_str(), 0755) != 0) return Internal("chmod " + dest + ": " + ErrnoText(errno));
  return dest;
}

}  // namespace nvdra::devices
