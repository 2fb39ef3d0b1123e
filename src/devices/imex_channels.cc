#include "devices/imex_channels.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "devices/device_names.h"
#include "devices/proc_devices.h"
#include "util/file_util.h"

namespace nvdra::devices {

namespace {
constexpr const char* kImexChannelsDevice = "nvidia-caps-imex-channels";
}

ImexChannels::ImexChannels(DriverRoot root, std::string proc_devices_path, bool allow_regular_files)
    : root_(std::move(root)), proc_devices_(std::move(proc_devices_path)), allow_regular_files_(allow_regular_files) {}

std::string ImexChannels::ChannelPath(int id) { return "/dev/nvidia-caps-imex-channels/channel" + std::to_string(id); }

Result<int> ImexChannels::Major() const {
  auto major = ReadCharDeviceMajor(proc_devices_, kImexChannelsDevice);
  if (!major.ok()) return major.status().Wrap("IMEX channels unavailable");
  return major;
}

Status ImexChannels::EnsureChannel(int id) const {
  if (id < 0 || id >= kMaxImexChannels) {
    return InvalidArgument("IMEX channel " + std::to_string(id) + " is out of range 0.." +
                           std::to_string(kMaxImexChannels - 1));
  }
  NVDRA_ASSIGN_OR_RETURN(int major, Major());
  const std::string path = root_.ContainerDevPath(ChannelPath(id));
  const dev_t want = makedev(static_cast<unsigned>(major), static_cast<unsigned>(id));
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (S_ISCHR(st.st_mode) && st.st_rdev == want) return Status::Ok();
    if (S_ISREG(st.st_mode) && allow_regular_files_) return Status::Ok();
    if (!S_ISCHR(st.st_mode)) {
      return FailedPrecondition(path + " exists but is not a character device");
    }
    // A node from before a reboot or module reload: its major is stale.
    if (::unlink(path.c_str()) != 0) {
      return FailedPrecondition(path + " has device number " + std::to_string(major(st.st_rdev)) + ":" +
                                std::to_string(minor(st.st_rdev)) + ", want " + std::to_string(major) + ":" +
                                std::to_string(id) + ", and cannot be replaced: " + ErrnoText(errno));
    }
  }
  std::string dir = path.substr(0, path.rfind('/'));
  NVDRA_RETURN_IF_ERROR(MakeDirectories(dir, 0755));
  if (::mknod(path.c_str(), S_IFCHR | 0666, want) == 0) {
    ::chmod(path.c_str(), 0666);
    return Status::Ok();
  }
  int err = errno;
  if (err == EEXIST) return EnsureChannel(id);  // raced with another creator
  if (allow_regular_files_) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    if (fd >= 0) {
      ::close(fd);
      return Status::Ok();
    }
    err = errno;
  }
  return FailedPrecondition("cannot create IMEX channel node " + path + " (" + std::to_string(major) + ":" +
                            std::to_string(id) + "): " + ErrnoText(err) +
                            "; run privileged or let nvidia-modprobe create it");
}

Result<cdi::DeviceNode> ImexChannels::ChannelNode(int id) const {
  NVDRA_RETURN_IF_ERROR(EnsureChannel(id));
  NVDRA_ASSIGN_OR_RETURN(int major, Major());
  cdi::DeviceNode n;
  n.path = ChannelPath(id);
  n.host_path = root_.HostDevPath(n.path);
  n.type = "c";
  n.major = major;
  n.minor = id;
  n.file_mode = 0666;
  return n;
}

}  // namespace nvdra::devices
