#include "devices/mock/mock_driver_install.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "devices/mock/mock_device_lib.h"
#include "devices/toolkit/ld_cache.h"
#include "util/file_util.h"

namespace nvdra::devices {

namespace {

struct MockLib {
  std::string file;    // name with the driver version
  std::string soname;  // "" when the soname is the file name
  bool dev_link;       // a <stem>.so -> soname link, as the installer makes for a few
  std::string subdir;  // "" or "vdpau"
};

std::vector<MockLib> Libs(const std::string& v) {
  return {
      {"libcuda.so." + v, "libcuda.so.1", true, ""},
      {"libnvidia-ml.so." + v, "libnvidia-ml.so.1", true, ""},
      {"libnvidia-ptxjitcompiler.so." + v, "libnvidia-ptxjitcompiler.so.1", true, ""},
      {"libnvidia-nvvm.so." + v, "libnvidia-nvvm.so.4", true, ""},
      {"libcudadebugger.so." + v, "libcudadebugger.so.1", false, ""},
      {"libnvidia-cfg.so." + v, "libnvidia-cfg.so.1", false, ""},
      {"libnvidia-opencl.so." + v, "libnvidia-opencl.so.1", false, ""},
      {"libnvidia-allocator.so." + v, "libnvidia-allocator.so.1", false, ""},
      {"libnvidia-gpucomp.so." + v, "", false, ""},
      {"libnvidia-pkcs11-openssl3.so." + v, "", false, ""},
      {"libEGL_nvidia.so." + v, "libEGL_nvidia.so.0", false, ""},
      {"libGLX_nvidia.so." + v, "libGLX_nvidia.so.0", false, ""},
      {"libvdpau_nvidia.so." + v, "libvdpau_nvidia.so.1", false, "vdpau"},
  };
}

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out.push_back(c);
    }
  }
  return out + "'";
}

Status EnsureFile(const std::string& path, const std::string& content, mode_t mode) {
  auto existing = ReadFileToString(path);
  if (!existing.ok() || *existing != content) {
    NVDRA_RETURN_IF_ERROR(WriteFileAtomically(path, content, mode, false));
  }
  if (::chmod(path.c_str(), mode) != 0) return Internal("chmod " + path + ": " + ErrnoText(errno));
  return Status::Ok();
}

// A stand-in for a driver library or firmware file: made empty when missing,
// and otherwise kept as it is, so a real shared object put in its place (as
// a container test puts a libcuda with its soname, for ldconfig to read)
// survives the plugin's later passes over the mock.
Status EnsureStandIn(const std::string& path, mode_t mode) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    if (::chmod(path.c_str(), mode) != 0) return Internal("chmod " + path + ": " + ErrnoText(errno));
    return Status::Ok();
  }
  return EnsureFile(path, "", mode);
}

Status EnsureSymlink(const std::string& path, const std::string& target) {
  char buf[PATH_MAX];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  if (n >= 0 && std::string(buf, static_cast<size_t>(n)) == target) return Status::Ok();
  ::unlink(path.c_str());
  if (::symlink(target.c_str(), path.c_str()) != 0) return Internal("symlink " + path + ": " + ErrnoText(errno));
  return Status::Ok();
}

Status EnsureNode(const std::string& path, int major, int minor) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) return Status::Ok();
  if (::geteuid() == 0 &&
      ::mknod(path.c_str(), S_IFCHR | 0666, makedev(static_cast<unsigned>(major), static_cast<unsigned>(minor))) == 0) {
    ::chmod(path.c_str(), 0666);
    return Status::Ok();
  }
  return EnsureFile(path, "", 0666);
}

Status EnsureSocket(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) return Status::Ok();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return EnsureFile(path, "", 0644);  // too long for a socket name
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Internal("socket: " + ErrnoText(errno));
  int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  int err = errno;
  ::close(fd);
  if (rc != 0) return Internal("bind " + path + ": " + ErrnoText(err));
  return Status::Ok();
}

std::string NvidiaSmiScript(const MockProfile& p) {
  const NodeInventory& inv = p.inventory;
  std::string s = "#!/bin/sh\n"
                  "# nvidia-smi of the nvdra mock driver " +
                  inv.driver_version +
                  ": lists the GPUs (and MIG devices)\n"
                  "# whose device nodes this process can see, so inside a container only the\n"
                  "# claimed ones. NVDRA_MOCK_DEV_ROOT prefixes /dev (outside a container).\n"
                  "dev=\"${NVDRA_MOCK_DEV_ROOT:-}/dev\"\n"
                  "case \"$1\" in\n"
                  "  -L|--list-gpus) ;;\n"
                  "  --version) printf 'NVIDIA-SMI " +
                  inv.driver_version + " (nvdra mock)\\nDRIVER version      : " + inv.driver_version +
                  "\\nCUDA Version        : " + inv.cuda_driver_version +
                  "\\n'; exit 0 ;;\n"
                  "  *) echo 'nvidia-smi (nvdra mock): only -L and --version are supported' >&2; exit 2 ;;\n"
                  "esac\n"
                  "n=0\n"
                  "gpu() {\n"
                  "  [ -e \"$dev/nvidia$1\" ] || return 1\n"
                  "  echo \"GPU $n: $2 (UUID: $3)\"; n=$((n + 1)); m=0\n"
                  "}\n"
                  "mig() {\n"
                  "  [ -e \"$dev/nvidia-caps/nvidia-cap$1\" ] && [ -e \"$dev/nvidia-caps/nvidia-cap$2\" ] || return 0\n"
                  "  echo \"  MIG $3 Device $m: (UUID: $4)\"; m=$((m + 1))\n"
                  "}\n";
  for (const auto& g : inv.gpus) {
    s += "if gpu " + std::to_string(g.minor) + " " + Quote(g.product_name) + " " + Quote(g.uuid) + "; then\n";
    for (const auto& m : g.migs) {
      s += "  mig " + std::to_string(MockDeviceLib::MigGiCapMinor(g.minor, m.gi_id)) + " " +
           std::to_string(MockDeviceLib::MigCiCapMinor(g.minor, m.gi_id, m.ci_id)) + " " + Quote(m.profile) + " " +
           Quote(m.uuid) + "\n";
    }
    s += "  :\nfi\n";
  }
  s += "[ \"$n\" -gt 0 ] || { echo 'No devices were found'; exit 6; }\n";
  return s;
}

// The driver's tools under usr/bin: nvidia-smi, placeholders of the others,
// and the host IMEX daemon's query tool, for host-managed IMEX: `-q --u=SOCK`
// fails without SOCK and otherwise prints the state tests write to
// etc/nvidia-imex/mock-state (UNAVAILABLE without one).
Status InstallMockTools(const std::string& bin, const MockProfile& profile, const std::string& v) {
  NVDRA_RETURN_IF_ERROR(MakeDirectories(bin, 0755));
  NVDRA_RETURN_IF_ERROR(EnsureFile(JoinPath(bin, "nvidia-smi"), NvidiaSmiScript(profile), 0755));
  for (const char* tool :
       {"nvidia-debugdump", "nvidia-persistenced", "nvidia-cuda-mps-control", "nvidia-cuda-mps-server"}) {
    NVDRA_RETURN_IF_ERROR(EnsureFile(JoinPath(bin, tool),
                                     std::string("#!/bin/sh\necho '") + tool + " (nvdra mock driver " + v + ")'\n",
                                     0755));
  }
  return EnsureFile(
      JoinPath(bin, "nvidia-imex-ctl"),
      "#!/bin/sh\n"
      "# nvidia-imex-ctl of the nvdra mock driver " +
          v +
          "\n"
          "root=\"$(cd \"$(dirname \"$0\")/../..\" && pwd)\"\n"
          "sock=\"\"\n"
          "for a in \"$@\"; do case \"$a\" in --u=*) sock=\"${a#--u=}\" ;; esac; done\n"
          "if [ -z \"$sock\" ] || [ ! -e \"$sock\" ]; then echo \"cannot connect to $sock\" >&2; exit 1; fi\n"
          "cat \"$root/etc/nvidia-imex/mock-state\" 2>/dev/null || echo UNAVAILABLE\n",
      0755);
}

}  // namespace

std::vector<std::string> MockDriverLibraries(const std::string& version) {
  std::vector<std::string> out;
  for (const auto& l : Libs(version)) out.push_back(l.file);
  return out;
}

std::string MockKernelVersionText(const std::string& version) {
  // The layout of the real file: the version is the word after "Kernel Module".
  return "NVRM version: NVIDIA UNIX x86_64 Kernel Module  " + version +
         "  Release Build  (nvdra mock)\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n";
}

Status RemoveMockDriverInstall(const std::string& driver_root, const std::string& version) {
  if (version.empty() || version.find('/') != std::string::npos) return Status::Ok();
  const std::string lib_dir = JoinPath(driver_root, kMockLibDir);
  auto remove = [](const std::string& path) -> Status {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Internal("unlink " + path + ": " + ErrnoText(errno));
    return Status::Ok();
  };
  for (const auto& l : Libs(version)) {
    std::string dir = l.subdir.empty() ? lib_dir : JoinPath(lib_dir, l.subdir);
    NVDRA_RETURN_IF_ERROR(remove(JoinPath(dir, l.file)));
    if (l.soname.empty()) continue;
    NVDRA_RETURN_IF_ERROR(remove(JoinPath(dir, l.soname)));
    if (l.dev_link) NVDRA_RETURN_IF_ERROR(remove(JoinPath(dir, l.soname.substr(0, l.soname.rfind(".so") + 3))));
  }
  NVDRA_RETURN_IF_ERROR(remove(JoinPath(driver_root, "etc/ld.so.cache")));
  const std::string fw = JoinPath(driver_root, "lib/firmware/nvidia/" + version);
  for (const char* f : {"gsp_ga10x.bin", "gsp_tu10x.bin"}) NVDRA_RETURN_IF_ERROR(remove(JoinPath(fw, f)));
  ::rmdir(fw.c_str());
  return Status::Ok();
}

Status BuildMockDriverInstall(const std::string& root, const MockProfile& profile) {
  return BuildMockDriverInstall({.driver_root = root, .dev_root = root}, profile);
}

Status BuildMockDriverInstall(const MockInstallPaths& paths, const MockProfile& profile) {
  const std::string& root = paths.driver_root;
  const std::string& v = profile.inventory.driver_version;
  if (v.empty() || v.find('/') != std::string::npos) {
    return InvalidArgument("mock profile " + profile.name + " has no usable driverVersion");
  }
  const std::string lib_dir = JoinPath(root, kMockLibDir);
  NVDRA_RETURN_IF_ERROR(MakeDirectories(JoinPath(lib_dir, "vdpau"), 0755));
  std::vector<LdCacheEntry> cache;
  for (const auto& l : Libs(v)) {
    std::string dir = l.subdir.empty() ? lib_dir : JoinPath(lib_dir, l.subdir);
    std::string cdir = l.subdir.empty() ? std::string(kMockLibDir) : std::string(kMockLibDir) + "/" + l.subdir;
    NVDRA_RETURN_IF_ERROR(EnsureStandIn(JoinPath(dir, l.file), 0755));
    if (!l.soname.empty()) {
      NVDRA_RETURN_IF_ERROR(EnsureSymlink(JoinPath(dir, l.soname), l.file));
      if (l.dev_link) {
        std::string stem = l.soname.substr(0, l.soname.rfind(".so") + 3);
        NVDRA_RETURN_IF_ERROR(EnsureSymlink(JoinPath(dir, stem), l.soname));
      }
    }
    // ldconfig names the soname link; libraries in vdpau/ are dlopened by
    // path and stay out of the cache, as on a real node.
    if (l.subdir.empty()) {
      std::string name = l.soname.empty() ? l.file : l.soname;
      cache.push_back({name, cdir + "/" + name, kLdCacheFlagElfLibc6 | kLdCacheFlagX8664Lib64});
    }
  }
  // Unversioned libraries the toolkit looks up by name.
  NVDRA_RETURN_IF_ERROR(EnsureStandIn(JoinPath(lib_dir, "libnvidia-nvvm70.so.4"), 0755));
  NVDRA_RETURN_IF_ERROR(EnsureStandIn(JoinPath(lib_dir, "libnvidia-egl-xcb.so.1"), 0755));
  NVDRA_RETURN_IF_ERROR(EnsureSymlink(JoinPath(lib_dir, "libnvidia-egl-xcb.so"), "libnvidia-egl-xcb.so.1"));
  cache.push_back({"libnvidia-nvvm70.so.4", std::string(kMockLibDir) + "/libnvidia-nvvm70.so.4",
                   kLdCacheFlagElfLibc6 | kLdCacheFlagX8664Lib64});
  NVDRA_RETURN_IF_ERROR(MakeDirectories(JoinPath(root, "etc"), 0755));
  NVDRA_RETURN_IF_ERROR(EnsureFile(JoinPath(root, "etc/ld.so.cache"), RenderLdCache(cache), 0644));

  NVDRA_RETURN_IF_ERROR(InstallMockTools(JoinPath(root, "usr/bin"), profile, v));

  const std::string fw = JoinPath(root, "lib/firmware/nvidia/" + v);
  NVDRA_RETURN_IF_ERROR(MakeDirectories(fw, 0755));
  for (const char* f : {"gsp_ga10x.bin", "gsp_tu10x.bin"}) {
    NVDRA_RETURN_IF_ERROR(EnsureStandIn(JoinPath(fw, f), 0644));
  }

  NVDRA_RETURN_IF_ERROR(MakeDirectories(JoinPath(root, "run/nvidia-persistenced"), 0755));
  NVDRA_RETURN_IF_ERROR(EnsureSocket(JoinPath(root, "run/nvidia-persistenced/socket")));

  const std::string dri = JoinPath(paths.dev_root, "dev/dri");
  NVDRA_RETURN_IF_ERROR(MakeDirectories(JoinPath(dri, "by-path"), 0755));
  NVDRA_RETURN_IF_ERROR(EnsureNode(JoinPath(paths.dev_root, "dev/nvidia-modeset"), kMockNvidiaMajor, 254));
  for (const auto& g : profile.inventory.gpus) {
    // card0 is usually the BMC's display: the GPUs start at card1.
    std::string card = "card" + std::to_string(g.minor + 1);
    std::string render = "renderD" + std::to_string(128 + g.minor);
    NVDRA_RETURN_IF_ERROR(EnsureNode(JoinPath(dri, card), kMockDrmMajor, g.minor + 1));
    NVDRA_RETURN_IF_ERROR(EnsureNode(JoinPath(dri, render), kMockDrmMajor, 128 + g.minor));
    NVDRA_RETURN_IF_ERROR(EnsureSymlink(JoinPath(dri, "by-path/pci-" + g.pci_bus_id + "-card"), "../" + card));
    NVDRA_RETURN_IF_ERROR(EnsureSymlink(JoinPath(dri, "by-path/pci-" + g.pci_bus_id + "-render"), "../" + render));
  }

  NVDRA_RETURN_IF_ERROR(MakeDirectories(JoinPath(root, "state"), 0755));
  return Status::Ok();
}

}  // namespace nvdra::devices
