// Who runs the node's nvidia-imex daemon (upstream's imex.mode and
// imex.isolation, the plugins' --imex-mode and --imex-isolation): the
// driver, one daemon per ComputeDomain scheduled by the node label
// (driverManaged, the default), or the node's administrator, as a host
// service (hostManaged, behind the HostManagedIMEXDaemon gate). In host-managed
// mode a channel claim is ready when the host daemon says READY on its
// command socket (nvidia-imex-ctl -q), the node gets no ComputeDomain label,
// and daemon claims are refused.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "util/status.h"

namespace nvdra::computedomain {

inline constexpr const char* kImexModeDriverManaged = "driverManaged";
inline constexpr const char* kImexModeHostManaged = "hostManaged";
inline constexpr const char* kImexIsolationDomain = "domain";
inline constexpr const char* kImexIsolationChannel = "channel";
// Upstream's default: the host's IMEX_CMD_UNIX_DOMAIN_PATH, under the driver root.
inline constexpr const char* kDefaultImexHostSocketPath = "/etc/nvidia-imex/imex_ctrl.sock";
// Upstream's message for a daemon claim in host-managed mode.
inline constexpr const char* kDaemonClaimsNotSupportedHostManaged =
    "ComputeDomain daemon claims are not supported when imex.mode=hostManaged";

struct ImexConfig {
  std::string mode = kImexModeDriverManaged;
  std::string isolation = kImexIsolationDomain;
  std::string host_socket_path = kDefaultImexHostSocketPath;
  bool host_managed() const { return mode == kImexModeHostManaged; }
};

// Upstream's rules and words: hostManaged needs the HostManagedIMEXDaemon
// gate; "channel" isolation is not implemented (upstream neither); anything
// else is unknown. The caller prefixes "imex configuration validation
// failed: ".
Status ValidateImexConfig(const ImexConfig& c, bool host_managed_gate_enabled);

// Runs a command and returns what it printed (stdout and stderr); tests
// give their own.
using OutputRunner = std::function<Result<std::string>(const std::vector<std::string>& argv)>;

// The host daemon's readiness, as upstream checks it: nvidia-imex-ctl (from
// the driver root's /opt/bin, /usr/bin, /usr/sbin, /bin or /sbin) run with
// `-q --u=<socket>`, which must exit 0 and print READY. The binary is run
// from the plugin's view of the driver root, and the socket path is taken
// under that root (upstream chroots into the root instead).
class HostImexProbe {
 public:
  HostImexProbe(std::string driver_root, std::string socket_path, OutputRunner run = {});
  // Unavailable (retryable) with what the tool said, or why it could not run.
  Status CheckReady() const;

 private:
  std::string driver_root_;
  std::string socket_path_;
  OutputRunner run_;
};

}  // namespace nvdra::computedomain
