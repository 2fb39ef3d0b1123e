#include "cmd/nvdra-cdi-hook/hook.h"

#include <elf.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <link.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>

namespace nvdra::cdihook {

void Logger::Debug(const std::string& msg) const {
  if (debug && !quiet && out) *out << "level=debug msg=\"" << msg << "\"\n";
}
void Logger::Info(const std::string& msg) const {
  if (!quiet && out) *out << "level=info msg=\"" << msg << "\"\n";
}
void Logger::Warning(const std::string& msg) const {
  if (!quiet && out) *out << "level=warning msg=\"" << msg << "\"\n";
}
void Logger::Error(const std::string& msg) const {
  if (out) *out << "level=error msg=\"" << msg << "\"\n";
}

namespace {

// A command line the hook refuses (exit status 1, as every other error).
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string Dirname(const std::string& p) {
  auto slash = p.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : p.substr(0, slash);
}

std::string Basename(const std::string& p) {
  auto slash = p.find_last_of('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string Listing(const std::vector<std::string>& dirs) {
  std::string out;
  std::set<std::string> seen;
  for (const auto& d : dirs) {
    if (seen.insert(d).second) out += d + "\n";
  }
  return out;
}

// Whether something (a dangling link included) is at `path`.
bool Present(const ContainerRoot& root, const std::string& path) {
  try {
    auto e = root.Locate(path, false, false);
    struct stat st;
    return ::fstatat(e.dir.get(), e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
  } catch (const std::system_error& err) {
    if (err.code().value() == ENOENT || err.code().value() == ENOTDIR) return false;
    throw;
  }
}

bool IsRegularFile(const ContainerRoot& root, const std::string& path) {
  try {
    auto e = root.Locate(path, true, false);
    struct stat st;
    return ::fstatat(e.dir.get(), e.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
  } catch (const std::system_error& err) {
    if (err.code().value() == ENOENT || err.code().value() == ENOTDIR) return false;
    throw;
  }
}

// A host file's content; nullopt when it does not exist.
std::optional<std::string> ReadHostFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
    throw SysError(errno, "failed to load params file " + path);
  }
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw SysError(errno, "read " + path);
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

// ---- update-ldcache ------------------------------------------------------

// The directories the container's loader searches without configuration,
// as the toolkit lists them (a Debian-like container has multiarch ones).
std::vector<std::string> SystemSearchPaths(bool debian_like) {
#if defined(__x86_64__)
  if (debian_like) return {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib"};
  return {"/lib", "/usr/lib", "/lib64", "/usr/lib64", "/libx32", "/usr/libx32"};
#elif defined(__aarch64__)
  if (debian_like) return {"/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib", "/usr/lib"};
  return {"/lib", "/usr/lib", "/lib64", "/usr/lib64"};
#else
  (void)debian_like;
  return {"/lib", "/usr/lib"};
#endif
}

// The directories the container's ld.so.conf names, following its
// "include" lines (a glob in the last component), leaving out the drop-ins
// this hook writes itself: a second run must see what the first saw.
std::set<std::string> ConfiguredDirectories(const ContainerRoot& root, const std::string& conf) {
  std::set<std::string> dirs;
  std::set<std::string> done;
  std::vector<std::string> todo = {conf};
  while (!todo.empty()) {
    std::string file = todo.front();
    todo.erase(todo.begin());
    if (!done.insert(file).second) continue;
    if (file == kFoldersDropIn || file == kSystemDirsDropIn) continue;
    auto content = root.ReadFile(file);
    if (!content) continue;
    for (const auto& raw : Lines(*content)) {
      std::string line = Trim(raw);
      if (line.empty() || line[0] == '#') continue;
      if (line.rfind("include ", 0) == 0) {
        std::string pattern = Trim(line.substr(8));
        if (pattern.empty()) continue;
        if (pattern[0] != '/') pattern = Dirname(file) + "/" + pattern;
        const std::string dir = Dirname(pattern);
        const std::string base = Basename(pattern);
        std::vector<std::string> matches;
        for (const auto& [name, type] : root.List(dir)) {
          if (::fnmatch(base.c_str(), name.c_str(), FNM_PERIOD) == 0) matches.push_back(dir + "/" + name);
        }
        std::sort(matches.begin(), matches.end());
        todo.insert(todo.end(), matches.begin(), matches.end());
        continue;
      }
      dirs.insert(line);
    }
  }
  return dirs;
}

// ldconfig must run as if the container's root were "/": it reads the
// configuration and libraries there and writes /etc/ld.so.cache there. It
// runs as root with the runtime's privileges, so which binary runs matters
// as much as where: a program from the image (its /sbin/ldconfig, or a
// dynamic one that loads the image's libc) would be the image author's code
// with the host's privileges. So the binary is the host's (--ldconfig-path
// is a host path, opened before anything of the container is touched, and
// it must be static), and it runs in a child with its own mount, PID, IPC,
// UTS and network namespaces, pivoted into the container's root with the
// host's tree detached: nothing it does, or is tricked into by a file of
// the image, reaches host paths. The parent writes the configuration it
// reads (in-root resolution, above) before starting it.
void CheckStaticElf(int fd, const std::string& path) {
  ElfW(Ehdr) eh;
  if (::pread(fd, &eh, sizeof eh, 0) != static_cast<ssize_t>(sizeof eh) ||
      std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
    throw std::runtime_error(path + " is not an ELF program");
  }
  for (int i = 0; i < eh.e_phnum; i++) {
    ElfW(Phdr) ph;
    off_t off = static_cast<off_t>(eh.e_phoff) + static_cast<off_t>(i) * eh.e_phentsize;
    if (::pread(fd, &ph, sizeof ph, off) != static_cast<ssize_t>(sizeof ph)) {
      throw std::runtime_error(path + ": truncated program headers");
    }
    if (ph.p_type == PT_INTERP) {
      throw std::runtime_error(path + " is dynamically linked: it would load the container's libraries; "
                                      "name a statically linked ldconfig with --ldconfig-path");
    }
  }
}

[[noreturn]] void ChildFail(const char* what) {
  std::string msg = std::string("update-ldcache: ") + what + ": " + std::strerror(errno) + "\n";
  ssize_t ignored = ::write(2, msg.data(), msg.size());
  (void)ignored;
  ::_exit(127);
}

int WaitExit(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// In the child: enter the container's root and exec ldconfig. Only
// async-signal-safe calls from here on (the parent may have threads).
[[noreturn]] void ExecLdconfigInRoot(const char* root_path, int root_fd, int exe_fd) {
  if (::unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET | CLONE_NEWPID) != 0) ChildFail("unshare");
  pid_t inner = ::fork();
  if (inner < 0) ChildFail("fork");
  if (inner > 0) ::_exit(WaitExit(inner) & 0xff);
  // PID 1 of its own namespace from here.
  if (::mount(nullptr, "/", nullptr, MS_SLAVE | MS_REC, nullptr) != 0) ChildFail("make / a slave mount");
  // pivot_root needs the new root to be a mount point.
  if (::mount(root_path, root_path, nullptr, MS_BIND | MS_REC, nullptr) != 0) ChildFail("bind the container root");
  if (::chdir(root_path) != 0) ChildFail("chdir to the container root");
  struct stat want, got;
  if (::fstat(root_fd, &want) != 0 || ::stat(".", &got) != 0 || want.st_ino != got.st_ino) {
    errno = ESTALE;
    ChildFail("the container root changed while the hook ran");
  }
  if (::syscall(SYS_pivot_root, ".", ".") == 0) {
    // The host's tree now sits under "."; detach it.
    if (::mount(nullptr, ".", nullptr, MS_SLAVE | MS_REC, nullptr) != 0) ChildFail("make the old root a slave");
    if (::umount2(".", MNT_DETACH) != 0) ChildFail("detach the old root");
  } else if (errno == EINVAL) {
    // An initramfs root cannot be pivoted away from; chroot in this
    // private namespace instead (the binary is the host's).
    if (::chroot(".") != 0) ChildFail("chroot");
  } else {
    ChildFail("pivot_root");
  }
  if (::chdir("/") != 0) ChildFail("chdir /");
  char arg0[] = "ldconfig", f[] = "-f", conf[] = "/etc/ld.so.conf", c[] = "-C", cache[] = "/etc/ld.so.cache";
  char* argv[] = {arg0, f, conf, c, cache, nullptr};
  char* envp[] = {nullptr};
  ::fexecve(exe_fd, argv, envp);
  ChildFail("exec ldconfig");
}

void RunLdconfig(const ContainerRoot& root, const std::string& ldconfig_path, const Logger& log) {
  UniqueFd exe(::open(ldconfig_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!exe.valid()) throw SysError(errno, "error reading host ldconfig " + ldconfig_path);
  CheckStaticElf(exe.get(), ldconfig_path);
  log.Debug("running " + ldconfig_path + " in " + root.path());
  pid_t pid = ::fork();
  if (pid < 0) throw SysError(errno, "fork");
  if (pid == 0) ExecLdconfigInRoot(root.path().c_str(), root.fd(), exe.get());
  int rc = WaitExit(pid);
  if (rc != 0)
    throw std::runtime_error("ldconfig in " + root.path() + " failed (exit status " + std::to_string(rc) + ")");
}

// ---- enable-cuda-compat --------------------------------------------------

// "580.65.06" -> {580, 65, 6}; nullopt for anything but one to three
// numbers (what the toolkit's semver parse accepts of a driver version).
std::optional<std::vector<long>> ParseVersion(const std::string& v) {
  std::string s = v;
  if (!s.empty() && s[0] == 'v') s = s.substr(1);
  auto parts = std::vector<std::string>();
  std::string cur;
  for (char ch : s + ".") {
    if (ch == '.') {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (parts.empty() || parts.size() > 3) return std::nullopt;
  std::vector<long> out;
  for (const auto& p : parts) {
    if (p.empty() || p.size() > 9 || !std::all_of(p.begin(), p.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      return std::nullopt;
    }
    out.push_back(std::stol(p));
  }
  while (out.size() < 3) out.push_back(0);
  return out;
}

// ---- command line --------------------------------------------------------

struct Flag {
  Flag(std::string n, bool m = false, bool b = false, std::string a = "")
      : name(std::move(n)), alias(std::move(a)), multi(m), boolean(b) {}
  std::string name;
  std::string alias;
  bool multi;  // repeatable; each value also split at ","
  bool boolean;
};

using Values = std::map<std::string, std::vector<std::string>>;

// Parses "--name value", "--name=value", "-name value" (either dash
// count, as the toolkit's CLI takes them) from args[start...].
Values ParseFlags(const std::vector<std::string>& args, size_t start, const std::vector<Flag>& flags) {
  Values v;
  for (size_t i = start; i < args.size(); i++) {
    const std::string& a = args[i];
    if (a == "--") {
      if (i + 1 < args.size()) throw UsageError("unexpected argument " + args[i + 1]);
      break;
    }
    if (a.size() < 2 || a[0] != '-') throw UsageError("unexpected argument " + a);
    std::string body = a.substr(a[1] == '-' ? 2 : 1);
    std::optional<std::string> inline_value;
    if (auto eq = body.find('='); eq != std::string::npos) {
      inline_value = body.substr(eq + 1);
      body = body.substr(0, eq);
    }
    const Flag* f = nullptr;
    for (const auto& cand : flags) {
      if (cand.name == body || (!cand.alias.empty() && cand.alias == body)) f = &cand;
    }
    if (f == nullptr) throw UsageError("flag provided but not defined: -" + body);
    if (f->boolean) {
      std::string val = inline_value.value_or("true");
      if (val != "true" && val != "false" && val != "1" && val != "0") {
        throw UsageError("invalid value \"" + val + "\" for flag -" + body);
      }
      v[f->name] = {val == "true" || val == "1" ? "true" : "false"};
      continue;
    }
    std::string val;
    if (inline_value) {
      val = *inline_value;
    } else {
      if (i + 1 >= args.size()) throw UsageError("flag needs an argument: -" + body);
      val = args[++i];
    }
    if (f->multi) {
      size_t s = 0;
      while (true) {
        size_t comma = val.find(',', s);
        v[f->name].push_back(val.substr(s, comma == std::string::npos ? std::string::npos : comma - s));
        if (comma == std::string::npos) break;
        s = comma + 1;
      }
    } else {
      if (v.count(f->name)) throw UsageError("flag -" + body + " given more than once");
      v[f->name] = {val};
    }
  }
  return v;
}

std::string One(const Values& v, const std::string& name, const std::string& def = "") {
  auto it = v.find(name);
  return it == v.end() || it->second.empty() ? def : it->second.front();
}

std::vector<std::string> All(const Values& v, const std::string& name) {
  auto it = v.find(name);
  return it == v.end() ? std::vector<std::string>() : it->second;
}

bool EnvTrue(std::optional<std::string> (*env)(const char*), const char* a, const char* b) {
  for (const char* k : {a, b}) {
    auto v = env(k);
    if (!v) continue;
    return *v == "1" || *v == "t" || *v == "T" || *v == "true" || *v == "TRUE" || *v == "True";
  }
  return false;
}

std::optional<std::string> RealEnv(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

const char* kUsage = "Usage: nvdra-cdi-hook [--debug] [--quiet] HOOK [FLAGS]\n"
                     "An OCI createContainer hook for CDI specs; it reads the container state on stdin.\n"
                     "Hooks:\n"
                     "  create-symlinks --link TARGET::LINK ...\n"
                     "  update-ldcache --folder DIR ... [--ldconfig-path /sbin/ldconfig]\n"
                     "  enable-cuda-compat --host-driver-version V [--host-cuda-version V]\n"
                     "                     [--cuda-compat-container-root /usr/local/cuda/compat]\n"
                     "  disable-device-node-modification\n"
                     "  chmod --mode OCTAL --path PATH ...\n"
                     "Every hook also takes --container-spec FILE (the state from FILE, not stdin).\n";

// Reads the state from --container-spec or `in`, then opens the root.
ContainerRoot OpenRoot(const Values& v, std::istream& in) {
  std::string file = One(v, "container-spec");
  std::string root;
  if (file.empty() || file == "-") {
    root = ContainerRootPath(in);
  } else {
    std::ifstream f(file);
    if (!f) throw std::runtime_error("failed to load container state: failed to open file: " + file);
    root = ContainerRootPath(f);
  }
  return ContainerRoot(root);
}

}  // namespace

std::string ContainerRootPath(std::istream& state) {
  nlohmann::json s;
  try {
    s = nlohmann::json::parse(state);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("failed to load container state: failed to decode container state: ") +
                             e.what());
  }
  if (!s.is_object()) throw std::runtime_error("failed to load container state: not a JSON object");
  std::string bundle = s.value("bundle", "");
  std::string root = s.contains("root") && s["root"].is_string() ? s["root"].get<std::string>() : "";
  if (root.empty()) {
    std::string config = (bundle.empty() ? std::string(".") : bundle) + "/config.json";
    std::ifstream f(config);
    if (!f) {
      throw std::runtime_error("failed to determined container root: failed to open OCI spec file: " + config);
    }
    nlohmann::json spec;
    try {
      spec = nlohmann::json::parse(f);
    } catch (const std::exception& e) {
      throw std::runtime_error(std::string("failed to determined container root: failed to load minimal OCI spec: ") +
                               e.what());
    }
    if (spec.is_object() && spec.contains("root") && spec["root"].is_object()) {
      root = spec["root"].value("path", "");
    }
  }
  if (!root.empty() && root[0] != '/') root = bundle + "/" + root;
  if (root.empty()) throw std::runtime_error("failed to determined container root: the spec names no root");
  return root;
}

void CreateSymlinks(const ContainerRoot& root, const std::vector<std::string>& links, const Logger& log) {
  std::set<std::string> done;
  for (const auto& l : links) {
    if (!done.insert(l).second) {
      log.Debug("Link " + l + " already processed");
      continue;
    }
    auto sep = l.find("::");
    if (sep == std::string::npos || l.find("::", sep + 2) != std::string::npos || sep == 0 || sep + 2 == l.size()) {
      throw std::runtime_error("invalid symlink specification " + l);
    }
    std::string target = l.substr(0, sep), link = l.substr(sep + 2);
    try {
      if (root.Symlink(target, link)) {
        log.Info("Symlinking " + link + " to " + target);
      } else {
        log.Debug("Link " + link + " already exists");
      }
    } catch (const std::exception& e) {
      throw std::runtime_error("failed to create link [" + target + " " + link + "]: " + e.what());
    }
  }
}

void UpdateLdcache(const ContainerRoot& root, const std::vector<std::string>& folders, const std::string& ldconfig_path,
                   const Logger& log) {
  if (root.path().empty() || root.path() == "/") {
    throw std::runtime_error("failed to determined container root: ldconfig must be run in the non-system root");
  }
  if (ldconfig_path.empty()) throw std::runtime_error("ldconfig-path must be specified");
  const auto system = SystemSearchPaths(IsRegularFile(root, "/etc/debian_version"));
  const std::string conf = "/etc/ld.so.conf";
  if (!Present(root, conf)) root.WriteFile(conf, std::string("include ") + kLdsoconfd + "/*.conf\n", 0644);
  std::set<std::string> known = ConfiguredDirectories(root, conf);
  known.insert(system.begin(), system.end());
  std::vector<std::string> add;
  for (const auto& f : folders) {
    if (known.insert(f).second) add.push_back(f);
  }
  if (add.empty()) {
    root.Remove(kFoldersDropIn);
  } else if (root.WriteFile(kFoldersDropIn, Listing(add), 0644)) {
    log.Debug(std::string("wrote ") + kFoldersDropIn);
  }
  root.WriteFile(kSystemDirsDropIn, Listing(system), 0644);
  RunLdconfig(root, ldconfig_path, log);
}

void EnableCudaCompat(const ContainerRoot& root, const std::string& host_driver_version,
                      const std::string& host_cuda_version, const std::string& compat_dir, const Logger& log) {
  if (host_driver_version.empty() && host_cuda_version.empty()) {
    log.Debug("Neither a host driver version nor a host CUDA version was specified");
    return;
  }
  auto dir = root.Resolve(compat_dir);
  if (!dir) {
    log.Debug("No CUDA forward compatibility libraries directory in container");
    return;
  }
  std::vector<std::string> libs;
  for (const auto& [name, type] : root.List(*dir)) {
    if (type == DT_REG && ::fnmatch("libcuda.so.*.*", name.c_str(), FNM_PERIOD) == 0) libs.push_back(name);
  }
  if (libs.empty()) {
    log.Debug("No CUDA forward compatibility libraries container");
    return;
  }
  if (libs.size() != 1) {
    log.Warning("Unexpected number of CUDA compat libraries in container");
    return;
  }
  if (!host_cuda_version.empty()) {
    // Only the compat library's ELF note says which CUDA version it
    // carries; without reading it the toolkit keeps the host's libraries.
    log.Debug("host CUDA version given: the compat libraries are not used");
    return;
  }
  auto compat = ParseVersion(libs[0].substr(std::strlen("libcuda.so.")));
  auto host = ParseVersion(host_driver_version);
  if (!compat) log.Warning("failed to parse compat driver version " + libs[0]);
  if (!host) log.Warning("failed to parse host driver version " + host_driver_version);
  if (!compat || !host || (*host)[0] >= (*compat)[0]) {
    log.Debug("Compat major version is not greater than the host driver major version");
    return;
  }
  if (root.WriteFile(kCompatDropIn, *dir + "\n", 0644)) {
    log.Info("Adding " + *dir + " to " + kCompatDropIn);
  }
}

std::string ParamsWithoutDeviceModification(const std::string& params) {
  std::string out;
  bool changed = false;
  for (auto line : Lines(params)) {
    if (line.rfind("ModifyDeviceFiles: ", 0) == 0) {
      if (line == "ModifyDeviceFiles: 0") return "";
      if (line == "ModifyDeviceFiles: 1") {
        line = "ModifyDeviceFiles: 0";
        changed = true;
      }
    }
    out += line + "\n";
  }
  return changed ? out : "";
}

void DisableDeviceNodeModification(const ContainerRoot& root, const std::string& host_params_path, const Logger& log) {
  auto params = ReadHostFile(host_params_path);
  if (!params) return;  // no driver loaded: nothing to hide
  const std::string modified = ParamsWithoutDeviceModification(*params);
  if (modified.empty()) return;
  const std::string target = "/proc/driver/nvidia/params";
  // Already hidden (a second run): the container reads the modified file.
  auto seen = root.ReadFile(target);
  auto lines = seen ? Lines(*seen) : std::vector<std::string>();
  if (std::find(lines.begin(), lines.end(), "ModifyDeviceFiles: 0") != lines.end()) {
    log.Debug("the container's params already disable device node modification");
    return;
  }
  static std::mt19937_64 rng{std::random_device{}()};
  char suffix[17];
  std::snprintf(suffix, sizeof suffix, "%016llx", static_cast<unsigned long long>(rng()));
  const std::string scratch = std::string("/run/nvidia-ctk-hook") + suffix;
  root.Locate(scratch + "/x", false, true);  // makes the scratch directory
  {
    UniqueFd dir = root.OpenPath(scratch, false);
    std::string at = "/proc/self/fd/" + std::to_string(dir.get());
    std::string opts = "size=" + std::to_string(modified.size());
    if (::mount("tmpfs", at.c_str(), "tmpfs", 0, opts.c_str()) != 0) {
      throw SysError(errno, "failed to create tmpfs mount for params file");
    }
  }
  root.WriteFile(scratch + "/nvct-params", modified, 0444);
  UniqueFd src = root.OpenPath(scratch + "/nvct-params", false);
  UniqueFd dst = root.OpenPath(target, true);
  std::string from = "/proc/self/fd/" + std::to_string(src.get());
  std::string to = "/proc/self/fd/" + std::to_string(dst.get());
  if (::mount(from.c_str(), to.c_str(), nullptr, MS_BIND | MS_PRIVATE, nullptr) != 0) {
    throw SysError(errno, "failed to mount modified params file");
  }
  // A bind mount takes its flags only from a remount.
  UniqueFd mounted = root.OpenPath(target, true);
  std::string again = "/proc/self/fd/" + std::to_string(mounted.get());
  if (::mount(nullptr, again.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NODEV, nullptr) != 0) {
    throw SysError(errno, "failed to make the params file read-only");
  }
  log.Info("mounted params with ModifyDeviceFiles: 0 over " + target);
}

void Chmod(const ContainerRoot& root, const std::vector<std::string>& paths, mode_t mode, const Logger& log) {
  for (const auto& p : paths) {
    UniqueFd fd;
    try {
      fd = root.OpenPath(p, true);
    } catch (const std::system_error& e) {
      log.Debug("Skipping path " + p + ": " + e.what());
      continue;
    }
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) continue;
    if ((st.st_mode & 07777) == mode) {
      log.Debug("Skipping path " + p + ": already desired mode");
      continue;
    }
    // chmod(2) through the descriptor's /proc link: the object resolved in
    // the root, not the path again.
    std::string at = "/proc/self/fd/" + std::to_string(fd.get());
    if (::chmod(at.c_str(), mode) != 0) {
      if (errno == EPERM || errno == EACCES) {
        log.Debug("Ignoring permission error with chmod on " + p);
        continue;
      }
      throw SysError(errno, "chmod " + p);
    }
  }
}

namespace {

// The chmod hook: its flags checked before the container state is read.
void ChmodHook(const Values& v, std::istream& state, Logger& log) {
  std::string mode = Trim(One(v, "mode"));
  if (mode.empty()) throw UsageError("a non-empty mode must be specified");
  char* end = nullptr;
  unsigned long m = std::strtoul(mode.c_str(), &end, 8);
  if (*end != '\0' || m > 07777) throw UsageError("failed to parse mode as octal: " + mode);
  for (const auto& p : All(v, "path")) {
    if (Trim(p).empty()) throw UsageError("paths must not be empty");
  }
  ContainerRoot root = OpenRoot(v, state);
  Chmod(root, All(v, "path"), static_cast<mode_t>(m), log);
}

}  // namespace

int RunHook(const std::vector<std::string>& args, std::istream& state, std::ostream& out, const HostPaths& host,
            std::optional<std::string> (*env)(const char*)) {
  if (env == nullptr) env = RealEnv;
  Logger log{&out, EnvTrue(env, "NVIDIA_CTK_DEBUG", "NVIDIA_CDI_DEBUG"),
             EnvTrue(env, "NVIDIA_CTK_QUIET", "NVIDIA_CDI_QUIET")};
  size_t i = 1;
  // Global flags before the hook's name.
  for (; i < args.size() && !args[i].empty() && args[i][0] == '-'; i++) {
    const std::string& a = args[i];
    if (a == "-d" || a == "--debug" || a == "-debug") {
      log.debug = true;
    } else if (a == "--quiet" || a == "-quiet") {
      log.quiet = true;
    } else if (a == "-h" || a == "--help" || a == "-help") {
      out << kUsage;
      return 0;
    } else {
      log.Error("flag provided but not defined: " + a);
      out << kUsage;
      return 1;
    }
  }
  if (i >= args.size()) {
    // As the toolkit's hook: no hook named is a warning, not a failed
    // container start.
    log.Warning("A hook must be specified");
    return 0;
  }
  const std::string hook = args[i];
  const Flag spec{"container-spec"};
  const Flag help("help", false, true, "h");
  try {
    if (hook == "create-symlinks") {
      Values v = ParseFlags(args, i + 1, {{"link", true}, spec, help});
      if (One(v, "help") == "true") return out << kUsage, 0;
      CreateSymlinks(OpenRoot(v, state), All(v, "link"), log);
    } else if (hook == "update-ldcache") {
      Values v = ParseFlags(args, i + 1, {{"folder", true}, {"ldconfig-path"}, spec, help});
      if (One(v, "help") == "true") return out << kUsage, 0;
      std::string ldconfig = One(v, "ldconfig-path", "/sbin/ldconfig");
      if (v.count("ldconfig-path") && ldconfig.empty()) throw UsageError("ldconfig-path must be specified");
      UpdateLdcache(OpenRoot(v, state), All(v, "folder"), ldconfig, log);
    } else if (hook == "enable-cuda-compat") {
      Values v = ParseFlags(
          args, i + 1, {{"host-driver-version"}, {"host-cuda-version"}, {"cuda-compat-container-root"}, spec, help});
      if (One(v, "help") == "true") return out << kUsage, 0;
      std::string driver = One(v, "host-driver-version"), cuda = One(v, "host-cuda-version");
      if (driver.empty() && cuda.empty()) return 0;  // nothing to compare: the state is not even read
      EnableCudaCompat(OpenRoot(v, state), driver, cuda, One(v, "cuda-compat-container-root", "/usr/local/cuda/compat"),
                       log);
    } else if (hook == "disable-device-node-modification") {
      Values v = ParseFlags(args, i + 1, {spec, help});
      if (One(v, "help") == "true") return out << kUsage, 0;
      // No driver params on the host, or nothing to change: the state is
      // not even read.
      auto params = ReadHostFile(host.driver_params);
      if (!params || ParamsWithoutDeviceModification(*params).empty()) return 0;
      DisableDeviceNodeModification(OpenRoot(v, state), host.driver_params, log);
    } else if (hook == "chmod") {
      Values v = ParseFlags(args, i + 1, {{"path", true}, {"mode"}, spec, help});
      if (One(v, "help") == "true") return out << kUsage, 0;
      ChmodHook(v, state, log);
    } else if (hook == "noop") {
      ParseFlags(args, i + 1, {spec, help});
    } else {
      // A hook of a newer or older toolkit: warn and let the container
      // start, as the toolkit's hook does.
      log.Warning("Unsupported incoming arguments " + hook + "; this hook is not supported by nvdra-cdi-hook");
      return 0;
    }
  } catch (const UsageError& e) {
    log.Error(hook + ": " + e.what());
    return 1;
  } catch (const std::exception& e) {
    log.Error(hook + ": " + e.what());
    return 1;
  }
  return 0;
}

}  // namespace nvdra::cdihook
