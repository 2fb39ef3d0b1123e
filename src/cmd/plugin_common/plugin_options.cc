#include "cmd/plugin_common/plugin_options.h"

#include <CLI/CLI.hpp>

#include <cstdlib>
#include <iostream>
#include <regex>
#include <sstream>

#include "config/feature_gates.h"
#include "util/build_info.h"
#include "util/go_flag_args.h"
#include "util/log.h"
#include "util/logging_flags.h"

namespace nvdra::plugin {

std::string PluginOptions::PluginDataDir(const std::string& driver) const {
  std::string d = kubelet.plugin.plugins_dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  return d + "/" + driver;
}

namespace {

// Durations are flags in whole seconds.
struct DurationFlags {
  int reconcile = 60;
  int completed_grace = 600;
  int tombstone_ttl = 300;
};

// Flags and environment variables with the upstream driver's names, so
// manifests carry over.
void AddUpstreamFlags(CLI::App& app, PluginOptions& o) {
  kubelet::AddKubeletFlags(app, o.kubelet);
  app.add_option("--node-name", o.node_name, "Name of this node (required)")->envname("NODE_NAME");
  app.add_option("--namespace", o.namespace_name, "Namespace of the driver's objects")
      ->envname("NAMESPACE")
      ->capture_default_str();
  app.add_option("--cdi-root", o.cdi_root, "Directory for CDI spec files")->envname("CDI_ROOT")->capture_default_str();
  // Upstream's alias is spelled "host_driver-root"; HOST_DRIVER_ROOT is its
  // second variable (read in ParsePluginOptions).
  app.add_option("--nvidia-driver-root,--host-driver-root,--host_driver-root", o.nvidia_driver_root,
                 "Root of the NVIDIA driver installation as the host sees it")
      ->envname("NVIDIA_DRIVER_ROOT")
      ->capture_default_str();
  app.add_option("--container-driver-root", o.container_driver_root,
                 "Where the host's driver root is mounted in this container (running on the host, not in a "
                 "container: /)")
      ->envname("DRIVER_ROOT_CTR_PATH")
      ->capture_default_str();
  app.add_option("--nvidia-cdi-hook-path", o.nvidia_cdi_hook_path,
                 "Host path of nvidia-cdi-hook for the CDI specs' hooks (empty: copy the nvdra-cdi-hook beside "
                 "this program into the plugin directory as nvidia-cdi-hook)")
      ->envname("NVIDIA_CDI_HOOK_PATH");
  app.add_option("--http-endpoint", o.http_endpoint, "host:port of the Prometheus metrics server (empty: off)")
      ->envname("HTTP_ENDPOINT");
  app.add_option("--metrics-path", o.metrics_path, "HTTP path of the metrics")
      ->envname("METRICS_PATH")
      ->capture_default_str();
  kube::AddKubeFlags(app, o.kube);
  app.add_option("--feature-gates", o.feature_gates, config::FeatureGates::FlagHelp())->envname("FEATURE_GATES");
  AddVerbosityFlag(app, o, "Log verbosity (0 config and permanent errors ... 6 every request, 7 every health check)");
  app.add_option("--logging-format", o.logging_format, "Log format: text or json")
      ->envname("LOGGING_FORMAT")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  app.add_option("--additional-xids-to-ignore", o.additional_xids_to_ignore,
                 "Comma-separated XIDs that do not make a GPU unhealthy")
      ->envname("ADDITIONAL_XIDS_TO_IGNORE");
  AddLoggingFlags(app, o);
}

void AddNvdraFlags(CLI::App& app, PluginOptions& o, DurationFlags& s) {
  app.add_option("--mock-hardware", o.mock_hardware,
                 "Use mock hardware: a built-in profile (h100x8, a100-mig, gb200x4) or a profile file")
      ->envname("NVDRA_MOCK_HARDWARE");
  app.add_option("--mock-state-dir", o.mock_state_dir,
                 "Where mock hardware builds its fake driver root (default: <plugin dir>/mock)")
      ->envname("NVDRA_MOCK_STATE_DIR");
  app.add_option("--mock-layout", o.mock_layout,
                 "Mock hardware's node layout: plain (the state dir is the driver root) or gpu-operator (the state "
                 "dir is the node's root, the driver under run/nvidia/driver)")
      ->envname("NVDRA_MOCK_LAYOUT")
      ->check(CLI::IsMember({"plain", "gpu-operator"}));
  app.add_option("--reconcile-period", s.reconcile, "Seconds between reconciler passes (jittered by up to 10%)")
      ->envname("NVDRA_RECONCILE_PERIOD")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  app.add_option("--completed-claim-grace", s.completed_grace,
                 "Seconds a prepared claim whose ResourceClaim is gone is kept before the plugin unprepares it")
      ->envname("NVDRA_COMPLETED_CLAIM_GRACE")
      ->check(CLI::Range(0, 604800))
      ->capture_default_str();
  app.add_option("--tombstone-ttl", s.tombstone_ttl, "Seconds a late Prepare retry of an unprepared claim is refused")
      ->envname("NVDRA_TOMBSTONE_TTL")
      ->check(CLI::Range(0, 604800))
      ->capture_default_str();
  app.add_option("--boot-id-path", o.boot_id_path, "File holding the node's boot id")
      ->envname("NVDRA_BOOT_ID_PATH")
      ->capture_default_str();
  app.add_option("--proc-devices-path", o.proc_devices_path, "Alternative /proc/devices (for character device majors)")
      ->envname("ALT_PROC_DEVICES_PATH");
  app.add_option("--mask-nvidia-driver-params", o.mask_nvidia_driver_params,
                 "true: show this container /proc/driver/nvidia/params with ModifyDeviceFiles: 0 before NVML "
                 "starts, so that it creates no device nodes")
      ->envname("MASK_NVIDIA_DRIVER_PARAMS")
      ->capture_default_str();
  app.add_flag("--health-streaming", o.health_streaming,
               "Serve the DRA device health stream (NodeWatchResources) and advertise it")
      ->envname("NVDRA_HEALTH_STREAMING");
  app.add_option("--driver-watch", o.driver_watch,
                 "Follow a reload of the NVIDIA driver (an upgrade by the GPU operator's driver manager): let go of "
                 "it while it is gone and serve the new one's files when it is back, without a restart")
      ->envname("NVDRA_DRIVER_WATCH")
      ->capture_default_str();
  app.add_option("--driver-version-file", o.driver_version_file,
                 "The NVIDIA kernel module's version file the driver watch reads (present while it is loaded)")
      ->envname("NVDRA_DRIVER_VERSION_FILE")
      ->capture_default_str();
}

// --help and --version print and return kAlreadyExists with an empty message.
// Go's one-dash spellings of long flags are taken (util/go_flag_args.h).
Status ParseArgs(CLI::App& app, int argc, const char* const* argv) {
  try {
    ParseGoFlags(app, argc, argv);
  } catch (const CLI::Success& e) {
    std::ostringstream out;
    if (e.get_name() == "CallForVersion") {
      out << e.what() << "\n";
    } else {
      out << app.help();
    }
    std::cout << out.str();
    return AlreadyExists("");
  } catch (const CLI::ParseError& e) {
    return InvalidArgument(e.what());
  }
  return Status::Ok();
}

Status Validate(const PluginOptions& o) {
  if (o.node_name.empty()) return InvalidArgument("--node-name (or NODE_NAME) is required");
  NVDRA_RETURN_IF_ERROR(ValidateLoggingFlags(o));
  if (o.cdi_root.empty()) return InvalidArgument("--cdi-root must not be empty");
  for (char c : o.kubelet.plugin.rolling_update_id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok) return InvalidArgument("--rolling-update-id must be letters, digits and '-'");
  }
  return Status::Ok();
}

}  // namespace

Result<PluginOptions> ParsePluginOptions(const std::string& program, const std::string& driver, int argc,
                                         const char* const* argv, const KindFlags& kind_flags) {
  PluginOptions o;
  DurationFlags seconds;
  CLI::App app{program + ": the nvdra kubelet plugin for " + driver};
  app.set_version_flag("--version", std::string("nvdra ") + BuildVersion() + "\ncommit: " + BuildCommit() +
                                        "\ndate: " + BuildDate());
  // Upstream's second variable for the driver root.
  if (std::getenv("NVIDIA_DRIVER_ROOT") == nullptr) {
    if (const char* host = std::getenv("HOST_DRIVER_ROOT"); host != nullptr && *host != 0) o.nvidia_driver_root = host;
  }
  app.allow_extras(false);
  AddUpstreamFlags(app, o);
  AddNvdraFlags(app, o, seconds);
  if (kind_flags) kind_flags(app);
  NVDRA_RETURN_IF_ERROR(ParseArgs(app, argc, argv));
  kubelet::FinishKubeletFlags(o.kubelet);
  NVDRA_RETURN_IF_ERROR(Validate(o));
  o.reconcile_period = std::chrono::seconds(seconds.reconcile);
  o.completed_claim_grace = std::chrono::seconds(seconds.completed_grace);
  o.tombstone_ttl = std::chrono::seconds(seconds.tombstone_ttl);
  return o;
}

}  // namespace nvdra::plugin
