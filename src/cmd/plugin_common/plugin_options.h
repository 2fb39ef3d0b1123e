// Command-line and environment configuration shared by both kubelet
// plugins. Flag names and environment fallbacks follow the upstream driver so
// manifests carry over; nvdra's own flags are documented in --help.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;
}  // namespace CLI

#include "kube/kube_flags.h"
#include "kubelet/kubelet_flags.h"
#include "util/logging_flags.h"
#include "util/status.h"

namespace nvdra::plugin {

// The logging flags (util/logging_flags.h) are the base: the webhook takes the same.
struct PluginOptions : LoggingFlags {
  // Upstream-compatible.
  std::string node_name;
  std::string namespace_name = "default";
  std::string cdi_root = "/etc/cdi";
  std::string nvidia_driver_root = "/";
  std::string container_driver_root = "/driver-root";
  // Host path of nvidia-cdi-hook for the specs' hooks; empty: copy the
  // nvdra-cdi-hook shipped beside the plugin into the plugin directory.
  std::string nvidia_cdi_hook_path;
  // --kubelet-plugins-directory-path, --kubelet-registrar-directory-path,
  // --healthcheck-port, --rolling-update-id, --claim-timeout, ...: the
  // kubelet surface's own flags.
  kubelet::KubeletFlags kubelet;
  std::string http_endpoint;
  std::string metrics_path = "/metrics";
  // --kubeconfig, --kube-api-qps, --kube-api-burst: the Kubernetes client's flags.
  kube::KubeFlags kube;
  std::string feature_gates;
  std::string additional_xids_to_ignore;
  // MASK_NVIDIA_DRIVER_PARAMS: "true" masks ModifyDeviceFiles in this
  // container before NVML starts (driver_params.h); anything else does not,
  // as upstream's wrapper tests for "true" alone.
  std::string mask_nvidia_driver_params = "false";
  bool MaskDriverParams() const { return mask_nvidia_driver_params == "true"; }

  // nvdra's own.
  std::string mock_hardware;   // profile name or file; empty: NVML
  std::string mock_state_dir;  // where the mock builds its fake driver root
  std::string mock_layout;     // "plain" or "gpu-operator" (devices/mock/mock_device_lib.h)
  std::chrono::seconds reconcile_period{60};
  std::chrono::seconds completed_claim_grace{600};
  std::chrono::seconds tombstone_ttl{300};
  std::string boot_id_path = "/proc/sys/kernel/random/boot_id";
  std::string proc_devices_path;  // ALT_PROC_DEVICES_PATH; empty: /proc/devices
  bool health_streaming = false;
  // Follow a reload of the NVIDIA driver (plugins whose kind supports it).
  bool driver_watch = true;
  std::string driver_version_file = "/proc/driver/nvidia/version";

  // compute-domain.nvidia.com only.

  // Whether info lines go to stdout (the split stream of the chosen format).

  // <plugins_dir>/<driver>
  std::string PluginDataDir(const std::string& driver) const;
};

// Parses argv for the plugin of `driver`. On --help or --version prints and
// returns a Status with code kAlreadyExists and an empty message (exit 0);
// on a bad flag returns InvalidArgument with a one-line reason.
// Adds a kind's own flags (only its binary has them) to the command line.
using KindFlags = std::function<void(CLI::App& app)>;

Result<PluginOptions> ParsePluginOptions(const std::string& program, const std::string& driver, int argc,
                                         const char* const* argv, const KindFlags& kind_flags = nullptr);

}  // namespace nvdra::plugin
