// The CDI container-edit model: what a runtime applies to a container for one
// device (or for every device of a spec). Only fields that a CDI 0.5.0 reader
// knows are modelled, so nothing we write can be rejected by older runtimes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace nvdra::cdi {

struct DeviceNode {
  std::string path;       // path inside the container, e.g. "/dev/nvidia0"
  std::string host_path;  // path on the host when it differs from `path` (needs 0.5.0)
  std::string type;       // "c", "b" or "" (runtime stats the node)
  std::optional<int64_t> major;
  std::optional<int64_t> minor;
  std::optional<uint32_t> file_mode;  // e.g. 0666
  std::string permissions;            // cgroup access, e.g. "rw"; "" means the runtime default
  friend bool operator==(const DeviceNode&, const DeviceNode&) = default;
};

struct Mount {
  std::string host_path;
  std::string container_path;
  std::vector<std::string> options;
  std::string type;  // "" unless needed (a type makes the spec need 0.4.0)
  friend bool operator==(const Mount&, const Mount&) = default;
};

struct Hook {
  std::string hook_name;  // "createContainer", "prestart", ...
  std::string path;
  std::vector<std::string> args;
  std::vector<std::string> env;
  std::optional<int> timeout;
  friend bool operator==(const Hook&, const Hook&) = default;
};

struct ContainerEdits {
  std::vector<std::string> env;  // "KEY=VALUE"
  std::vector<DeviceNode> device_nodes;
  std::vector<Mount> mounts;
  std::vector<Hook> hooks;

  bool empty() const { return env.empty() && device_nodes.empty() && mounts.empty() && hooks.empty(); }
  // Appends `other`, skipping device nodes, mounts and env entries already
  // present, so edits shared by several devices appear once.
  void Append(const ContainerEdits& other);
  friend bool operator==(const ContainerEdits&, const ContainerEdits&) = default;
};

}  // namespace nvdra::cdi
