#include "computedomain/imex_mode.h"

#include <sys/stat.h>
#include <unistd.h>

#include "devices/nvidia_smi_control.h"
#include "util/file_util.h"

namespace nvdra::computedomain {

Status ValidateImexConfig(const ImexConfig& c, bool host_managed_gate_enabled) {
  if (c.mode == kImexModeHostManaged) {
    if (!host_managed_gate_enabled) {
      return InvalidArgument(std::string("imex.mode=\"") + kImexModeHostManaged +
                             "\" requires the HostManagedIMEXDaemon feature gate to be enabled");
    }
  } else if (c.mode != kImexModeDriverManaged) {
    return InvalidArgument("unknown imex.mode \"" + c.mode + "\"");
  }
  if (c.isolation.empty() || c.isolation == kImexIsolationDomain) return Status::Ok();
  if (c.isolation == kImexIsolationChannel) {
    return InvalidArgument(std::string("imex.isolation=\"") + kImexIsolationChannel +
                           "\" is not supported yet: per-workload IMEX channel allocation is not implemented");
  }
  return InvalidArgument("unknown imex.isolation \"" + c.isolation + "\": must be \"" + kImexIsolationDomain +
                         "\" or \"" + kImexIsolationChannel + "\"");
}

HostImexProbe::HostImexProbe(std::string driver_root, std::string socket_path, OutputRunner run)
    : driver_root_(std::move(driver_root)), socket_path_(std::move(socket_path)), run_(std::move(run)) {
  if (!run_) {
    run_ = [](const std::vector<std::string>& argv) {
      return devices::RunCommandOutput(argv, {}, std::chrono::seconds(10));
    };
  }
}

Status HostImexProbe::CheckReady() const {
  std::string tool;
  for (const char* dir : {"/opt/bin", "/usr/bin", "/usr/sbin", "/bin", "/sbin"}) {
    std::string p = JoinPath(JoinPath(driver_root_, dir), "nvidia-imex-ctl");
    struct stat st;
    if (::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0) {
      tool = p;
      break;
    }
  }
  if (tool.empty()) {
    return Unavailable("nvidia-imex-ctl not found under driver root \"" + driver_root_ +
                       "\" (is nvidia-imex installed on this node?)");
  }
  const std::string socket = JoinPath(driver_root_, socket_path_);
  auto out = run_({tool, "-q", "--u=" + socket});
  if (!out.ok()) {
    return Unavailable("error running nvidia-imex-ctl (socket \"" + socket + "\"): " + out.status().message());
  }
  // READY as a word of its own: "NOT READY" is not ready.
  bool ready = false;
  std::string prev, word;
  for (size_t i = 0; i <= out->size(); ++i) {
    char c = i < out->size() ? (*out)[i] : ' ';
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == ':' || c == ',') {
      if (!word.empty()) {
        if (word == "READY" && prev != "NOT") ready = true;
        prev = word;
        word.clear();
      }
    } else {
      word.push_back(c);
    }
  }
  if (!ready) {
    std::string said = *out;
    while (!said.empty() && (said.back() == '\n' || said.back() == ' ')) said.pop_back();
    return Unavailable("host nvidia-imex daemon not ready: " + said.substr(0, 300));
  }
  return Status::Ok();
}

}  // namespace nvdra::computedomain
