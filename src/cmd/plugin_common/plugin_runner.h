// The one main() both kubelet plugins share: a Plugin object that builds,
// phase by phase, everything a kubelet plugin runs (the Kubernetes client,
// hardware, the CDI writer and the ledger, the device kind, metrics, the engine
// and the reconciler, the slice publisher, device health, the kubelet-facing
// servers) and takes it down in the reverse order. A plugin binary only says
// which device kind it serves.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cdi/cdi_spec_writer.h"
#include "cmd/plugin_common/companion_list.h"
#include "cmd/plugin_common/kube_sources.h"
#include "cmd/plugin_common/plugin_options.h"
#include "cmd/plugin_common/slice_readiness.h"
#include "config/feature_gates.h"
#include "devices/device_lib.h"
#include "devices/driver_watch.h"
#include "devices/toolkit/driver_files.h"
#include "driver/device_kind.h"
#include "driver/engine.h"
#include "driver/ledger_claims_view.h"
#include "driver/reconciler.h"
#include "driver/reloadable_kind.h"
#include "kube/event_recorder.h"
#include "kube/kube_client.h"
#include "kube/slice_publisher.h"
#include "kubelet/device_health_broadcaster.h"
#include "kubelet/dra_plugin_server.h"
#include "kubelet/health_server.h"
#include "kubelet/shutdown_signal.h"
#include "ledger/claim_ledger.h"
#include "metrics/plugin_metrics.h"
#include "util/periodic_worker.h"

namespace nvdra::plugin {

struct KindContext {
  const PluginOptions& options;
  const config::FeatureGates& gates;  // parsed and validated --feature-gates
  std::string plugin_dir;
  devices::DeviceLib& lib;
  const devices::NodeInventory& inventory;
  const cdi::CdiSpecWriter& cdi;  // for static specs a kind writes at start
  kube::KubeClient& kube;
  // The driver's files and hooks for spec-level edits (shared, cached).
  std::shared_ptr<devices::DriverFilesCache> driver_files;
  // The claims this node holds (every plugin process's), opened before the
  // kind: a kind may read what this node held before a restart, and who
  // holds a device now, through this view only (the engine alone reads and
  // writes the ledger).
  const driver::ClaimsView& claims;
  // What the kind relies on beside itself (watches, background loops that
  // use the client or the hardware above): the plugin keeps these alive as
  // long as the kind and, right after the kind, stops them (the last added
  // first) and destroys them, before anything above in this context goes
  // away. Add each part as soon as it is built (see companion_list.h).
  CompanionList& companions;
  // The thread that the plugin's short background loops share (see
  // PeriodicGroup); lives longer than the kind and its companions.
  PeriodicGroup& background;
  // Set once a shutdown signal arrived: a factory that waits (for watches to
  // sync) checks it so a signal during startup is acted on at once.
  const kubelet::ShutdownWatch& shutdown;
  // Where a kind that writes static CDI specs (the compute-domain plugin's
  // base spec, which names the driver's files) leaves what writes them
  // again: the plugin calls it when the driver's or the toolkit's files
  // changed under a steady driver. Each build of the kind sets it anew.
  std::function<Status()>& static_specs;
};

using KindFactory = std::function<Result<std::unique_ptr<driver::DeviceKind>>(KindContext&)>;

// The first phase, before anything else runs: flags, feature gates, logging.
struct PluginConfig {
  PluginOptions options;
  config::FeatureGates gates;
  // The kind can be built again on a new driver (the plugin then follows
  // driver reloads while --driver-watch is on; plugin_reload.cc).
  bool follows_driver_reloads = false;
};

// Checks a kind's own flags against the parsed configuration (a flag that
// needs another, one that needs a gate) before anything is written to disk.
using KindCheck = std::function<Status(const PluginConfig&)>;

// Parses the command line, checks it (the kind's flags with `kind_check`)
// and starts logging. --help and --version return kAlreadyExists with an
// empty message (exit 0); anything else is a usage error (exit 2).
Result<PluginConfig> LoadPluginConfig(const std::string& program, const std::string& driver, int argc, char** argv,
                                      const KindFlags& kind_flags = nullptr, const KindCheck& kind_check = nullptr);

// One running kubelet plugin. Start builds it in phases, each a step of its
// own; the members are declared in the order the phases build them, so
// destruction takes the plugin down in the reverse order: the servers stop
// taking calls first, then health monitoring, the publisher, the reconciler,
// the engine, metrics, and the state underneath last. A failed phase returns
// its error and whatever was built is taken down the same way.
class Plugin {
 public:
  // `codec`: the kind's (its driver name is the plugin's); outlives the plugin.
  // A shutdown request (`shutdown`, which must outlive the plugin) ends
  // the start between phases and in discovery's retries, with an
  // Unavailable "startup interrupted by signal N".
  static Result<std::unique_ptr<Plugin>> Start(std::string program, const ledger::KindCodec& codec, PluginConfig config,
                                               const KindFactory& factory, kubelet::ShutdownWatch& shutdown);
  ~Plugin();
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

 private:
  Plugin(std::string program, const ledger::KindCodec& codec, PluginConfig config, kubelet::ShutdownWatch& shutdown);

  Status CheckNoOtherInstance();
  Status MaskOwnDriverParams();
  Status SetUpHardware();
  Status SetUpDriverFiles();
  Status SetUpCdiAndLedger();
  Status SetUpKubeClient();
  Status SetUpKind(const KindFactory& factory);
  Status SetUpMetrics();
  Status StartEngineAndReconciler();
  Status StartSlicePublisher();
  // `at_start`: a failure is kept for the readiness probe (only then, as
  // the servers' threads read it after).
  Status StartHealthMonitoring(bool at_start = true);
  Status StartServers();
  Status StartDriverWatch();

  // Driver reloads (plugin_reload.cc): one look at the driver, and what the
  // plugin does when it went away and when it is back.
  Status CheckDriver();
  void OnDriverGone(const devices::DriverChange& change);
  Status OnDriverBack(const devices::DriverChange& change);
  devices::DriverWatchPaths DriverPaths() const;
  void WatchDriverLibraries();
  void StopHealthMonitoring();
  // The driver's and the toolkit's files the specs name (plugin_reload.cc):
  // after a change under a steady driver, the specs are written again and
  // every spec that still names a file that is gone is logged.
  void CheckDriverFiles();
  void WarnSpecsNaming(const std::vector<std::string>& files, const std::string& why);
  void MarkAllDevices(kubelet::DeviceHealthStatus status, const std::string& message);

  void OnHealthEvent(const devices::DeviceHealthEvent& event);
  void OnOwnHealthEvent(const devices::DeviceHealthEvent& event);
  // Ok unless the plugin runs degraded (device health monitoring that was
  // asked for failed to start, ResourceSlices not published: the API server
  // unreachable); the health server's "readiness" service.
  Status Readiness() const;

  // Options and logging.
  const std::string program_;
  const ledger::KindCodec& codec_;  // the kind's, for the ledger (opened before the kind)
  const std::string driver_;
  const PluginOptions options_;
  const config::FeatureGates gates_;
  const std::string plugin_dir_;
  kubelet::ShutdownWatch& shutdown_;
  const bool follows_driver_reloads_;
  // The Kubernetes client and what speaks through it: built first, as the
  // kubeconfig is checked before anything is written to disk.
  std::unique_ptr<kube::KubeClient> kube_;
  std::unique_ptr<KubeClaimSource> claims_;
  std::unique_ptr<kube::EventRecorder> events_;
  // Hardware.
  std::unique_ptr<devices::DeviceLib> lib_;
  devices::NodeInventory inventory_;
  // The driver's files and hooks (asks lib_ for the version: declared after it).
  std::shared_ptr<devices::DriverFilesCache> driver_files_;
  // CDI and the ledger.
  std::unique_ptr<cdi::CdiSpecWriter> cdi_;
  std::unique_ptr<ledger::ClaimLedger> ledger_;
  std::unique_ptr<driver::LedgerClaimsView> claims_view_;  // over ledger_, for the kind
  // The device kind, and what it relies on (destroyed after it).
  // Runs the reconciler, the slice sync and the kind's maintenance, one
  // at a time; declared before them so that it outlives them.
  std::unique_ptr<PeriodicGroup> background_ = std::make_unique<PeriodicGroup>("background");
  CompanionList kind_companions_;
  std::function<Status()> static_specs_;  // KindContext::static_specs
  std::unique_ptr<driver::DeviceKind> kind_;
  // kind_ when the plugin follows driver reloads, and what rebuilds it.
  driver::ReloadableKind* reloadable_ = nullptr;
  KindFactory factory_;
  // Metrics.
  std::unique_ptr<metrics::PluginMetrics> metrics_;
  // The engine and the reconciler.
  // The kind's device metadata files, when it has them (the engine's).
  std::unique_ptr<driver::DeviceMetadataFiles> metadata_;
  std::unique_ptr<driver::Engine> engine_;
  std::unique_ptr<driver::Reconciler> reconciler_;
  // The slice publisher and what it reports to (metrics, readiness).
  std::unique_ptr<SliceReadiness> slice_readiness_;
  std::unique_ptr<kube::SlicePublisher> publisher_;
  // Device health.
  kubelet::DeviceHealthBroadcaster broadcaster_;
  std::unique_ptr<devices::DeviceHealthSource> health_source_;
  std::unique_ptr<devices::DeviceHealthSource> own_health_;  // the kind's own (DevicePublisher)
  // Why device health monitoring failed to start; "" when it runs or is off.
  // Written once before the servers start, read by their threads after.
  std::string health_monitor_failure_;
  // The kubelet-facing servers.
  std::unique_ptr<kubelet::DraPluginServer> server_;
  std::unique_ptr<kubelet::HealthServer> health_server_;
  // The driver watch: last, so it stops before anything it uses.
  std::unique_ptr<devices::DriverWatch> driver_watch_;
  std::vector<std::string> watched_libraries_;  // of the driver now loaded
  uint64_t files_generation_ = 0;               // of driver_files_, when the specs were last written
  // An NVML answer that the driver is not loaded, from a health event.
  Mutex nvml_gone_mu_;
  std::string nvml_gone_ GUARDED_BY(nvml_gone_mu_);
  std::unique_ptr<PeriodicWorker> driver_watcher_;
};

// Runs the plugin of `codec`'s driver until SIGTERM/SIGINT/SIGHUP, also one
// that arrives while it is still starting (exit code 0 then too); returns
// the process exit code.
int RunPlugin(const std::string& program, const ledger::KindCodec& codec, const KindFactory& factory, int argc,
              char** argv, const KindFlags& kind_flags = nullptr, const KindCheck& kind_check = nullptr,
              bool follows_driver_reloads = false);

}  // namespace nvdra::plugin
