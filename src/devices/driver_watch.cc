#include "devices/driver_watch.h"

#include <dirent.h>
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>

#include "util/file_util.h"

namespace nvdra::devices {

Result<std::string> ParseKernelModuleVersion(const std::string& text) {
  std::istringstream in(text.substr(0, text.find('\n')));
  std::string word, prev;
  // The version is the first word after "Module" (or "Module for <arch>")
  // that starts with a digit.
  bool after_module = false;
  while (in >> word) {
    if (word == "Module") after_module = true;
    if (after_module && !word.empty() && word[0] >= '0' && word[0] <= '9') return word;
  }
  return InvalidArgument("no kernel module version in \"" + text.substr(0, text.find('\n')) + "\"");
}

bool IsDriverNotLoaded(const Status& status) {
  if (status.ok()) return false;
  const std::string& m = status.message();
  for (const char* s :
       {"NVML_ERROR_DRIVER_NOT_LOADED", "NVML_ERROR_UNINITIALIZED", "Driver Not Loaded", "Uninitialized"}) {
    if (m.find(s) != std::string::npos) return true;
  }
  return false;
}

DriverPresence ProbeDriver(const DriverWatchPaths& paths) {
  DriverPresence p;
  auto text = ReadFileToString(paths.version_file);
  if (!text.ok()) {
    p.reason = paths.version_file + " is gone (kernel module unloaded)";
    return p;
  }
  auto version = ParseKernelModuleVersion(*text);
  if (!version.ok()) {
    p.reason = paths.version_file + ": " + version.status().message();
    return p;
  }
  if (!paths.ready_marker.empty()) {
    const std::string dir = paths.ready_marker.substr(0, paths.ready_marker.rfind('/'));
    if (PathExists(dir) && !PathExists(paths.ready_marker)) {
      p.reason = "driver-ready marker " + paths.ready_marker + " is gone (the driver is being replaced)";
      return p;
    }
  }
  for (const auto& lib : paths.libraries) {
    if (!PathExists(lib)) {
      p.reason = "driver library " + lib + " is gone";
      return p;
    }
  }
  p.present = true;
  p.version = *version;
  return p;
}

std::vector<std::string> FilesHeldBySelf(const std::vector<std::string>& prefixes) {
  std::vector<std::string> out;
  auto keep = [&](const std::string& path) {
    for (const auto& p : prefixes) {
      if (!p.empty() && path.starts_with(p)) {
        out.push_back(path);
        return;
      }
    }
  };
  if (DIR* d = ::opendir("/proc/self/fd"); d != nullptr) {
    while (dirent* e = ::readdir(d)) {
      char buf[PATH_MAX];
      std::string link = std::string("/proc/self/fd/") + e->d_name;
      ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
      if (n > 0) keep(std::string(buf, static_cast<size_t>(n)));
    }
    ::closedir(d);
  }
  if (auto maps = ReadFileToString("/proc/self/maps"); maps.ok()) {
    std::istringstream in(*maps);
    for (std::string line; std::getline(in, line);) {
      auto slash = line.find('/');
      if (slash != std::string::npos) keep(line.substr(slash));
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

DriverChange DriverWatch::Gone(std::string reason) {
  loaded_ = false;
  return {DriverTransition::kGone, version_, "", std::move(reason)};
}

DriverChange DriverWatch::Observe(const DriverPresence& presence) {
  if (loaded_) {
    if (!presence.present) return Gone(presence.reason);
    if (presence.version != version_) {
      return Gone("driver version changed from " + version_ + " to " + presence.version);
    }
    return {};
  }
  if (!presence.present) return {};
  DriverChange back{DriverTransition::kBack, version_, presence.version, ""};
  loaded_ = true;
  previous_ = version_;
  version_ = presence.version;
  return back;
}

DriverChange DriverWatch::ObserveNvml(const Status& status) {
  if (!loaded_ || !IsDriverNotLoaded(status)) return {};
  return Gone("NVML: " + status.message());
}

}  // namespace nvdra::devices
