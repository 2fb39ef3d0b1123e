#include "cmd/plugin_common/plugin_runner.h"

#include <malloc.h>

#include <algorithm>
#include <iostream>
#include <utility>

#include "cmd/config_kinds/config_kinds.h"
#include "cmd/plugin_common/driver_params.h"
#include "devices/backends/open_device_lib.h"
#include "kubelet/abseil_mutex_mode.h"
#include "kubelet/grpc_event_engine.h"
#include "kubelet/shutdown_signal.h"
#include "util/failpoint.h"
#include "util/file_util.h"
#include "util/log.h"

namespace nvdra::plugin {

namespace {

kubelet::DeviceHealthStatus ToKubelet(devices::HealthState s) {
  switch (s) {
    case devices::HealthState::kHealthy: return kubelet::DeviceHealthStatus::kHealthy;
    case devices::HealthState::kUnhealthy: return kubelet::DeviceHealthStatus::kUnhealthy;
    case devices::HealthState::kUnmonitored: return kubelet::DeviceHealthStatus::kUnknown;
    case devices::HealthState::kNotice: break;  // never streamed: it changes no device's health
  }
  return kubelet::DeviceHealthStatus::kUnknown;
}

Status StartupInterrupted(int sig) { return Unavailable("startup interrupted by signal " + std::to_string(sig)); }

// A failed discovery is retried (for about four minutes), never published
// as an empty node; a shutdown signal ends the wait between attempts.
Result<devices::NodeInventory> DiscoverWithRetry(devices::DeviceLib& lib, kubelet::ShutdownWatch& shutdown) {
  constexpr int kAttempts = 30;
  for (int attempt = 1;; attempt++) {
    Status injected = NVDRA_FAILPOINT("plugin-device-discovery");
    auto inventory = injected.ok() ? lib.Discover() : Result<devices::NodeInventory>(injected);
    if (inventory.ok() || attempt >= kAttempts) return inventory;
    NVDRA_ERROR("device discovery failed (attempt {}), retrying: {}", attempt, inventory.status().message());
    if (shutdown.WaitFor(std::chrono::seconds(std::min(attempt, 10)))) return StartupInterrupted(shutdown.signal());
  }
}

}  // namespace

Result<PluginConfig> LoadPluginConfig(const std::string& program, const std::string& driver, int argc, char** argv,
                                      const KindFlags& kind_flags, const KindCheck& kind_check) {
  NVDRA_ASSIGN_OR_RETURN(PluginOptions options, ParsePluginOptions(program, driver, argc, argv, kind_flags));
  auto gates = config::FeatureGates::Parse(options.feature_gates);
  if (!gates.ok()) return gates.status().Wrap("--feature-gates");
  NVDRA_RETURN_IF_ERROR(gates->Validate().Wrap("--feature-gates"));
  NVDRA_RETURN_IF_ERROR(CheckAlphaLoggingFlags(options, gates->Enabled(config::Gate::kLoggingAlphaOptions)));
  InitLogging(options.verbosity, options.logging_format, options.SplitLogStream());
  if (!options.vmodule.empty()) SetVModule(*ParseVModule(options.vmodule));
  NVDRA_RETURN_IF_ERROR(gates->RefuseUnimplemented().Wrap("--feature-gates"));
  PluginConfig config{std::move(options), std::move(gates).value()};
  if (kind_check) NVDRA_RETURN_IF_ERROR(kind_check(config));
  return config;
}

Plugin::Plugin(std::string program, const ledger::KindCodec& codec, PluginConfig config,
               kubelet::ShutdownWatch& shutdown)
    : program_(std::move(program)),
      codec_(codec),
      driver_(codec.driver_name()),
      options_(std::move(config.options)),
      gates_(std::move(config.gates)),
      plugin_dir_(options_.PluginDataDir(driver_)),
      shutdown_(shutdown),
      follows_driver_reloads_(config.follows_driver_reloads && options_.driver_watch) {}

Plugin::~Plugin() = default;

Result<std::unique_ptr<Plugin>> Plugin::Start(std::string program, const ledger::KindCodec& codec, PluginConfig config,
                                              const KindFactory& factory, kubelet::ShutdownWatch& shutdown) {
  std::unique_ptr<Plugin> p(new Plugin(std::move(program), codec, std::move(config), shutdown));
  NVDRA_INFO("Starting {} for driver {} on node {}; feature gates: {}", p->program_, p->driver_, p->options_.node_name,
             p->gates_.ToString());
  Plugin& plugin = *p;
  const std::pair<const char*, std::function<Status()>> phases[] = {
      {"instance check", [&] { return plugin.CheckNoOtherInstance(); }},
      // Before anything is written to disk: a missing or unparsable
      // kubeconfig leaves no plugin directory, ledger or CDI root behind.
      {"Kubernetes client", [&] { return plugin.SetUpKubeClient(); }},
      {"hardware", [&] { return plugin.SetUpHardware(); }},
      {"CDI and ledger", [&] { return plugin.SetUpCdiAndLedger(); }},
      {"device kind", [&] { return plugin.SetUpKind(factory); }},
      {"metrics", [&] { return plugin.SetUpMetrics(); }},
      {"engine and reconciler", [&] { return plugin.StartEngineAndReconciler(); }},
      {"slice publisher", [&] { return plugin.StartSlicePublisher(); }},
      {"health monitoring", [&] { return plugin.StartHealthMonitoring(); }},
      {"servers", [&] { return plugin.StartServers(); }},
      {"driver watch", [&] { return plugin.StartDriverWatch(); }},
  };
  // A signal between phases stops the start there; what was built is taken
  // down in the reverse order, as after a failed phase.
  for (const auto& [name, phase] : phases) {
    if (int sig = shutdown.signal(); sig != 0) return StartupInterrupted(sig).Wrap(std::string("before ") + name);
    NVDRA_RETURN_IF_ERROR(phase());
  }
  return p;
}

// Before NVML is loaded: NVML reads ModifyDeviceFiles when it initializes.
Status Plugin::MaskOwnDriverParams() {
  auto r = MaskDriverParams(kDriverParamsPath, JoinPath(plugin_dir_, "driver-params"));
  if (!r.ok()) return r.status().Wrap("mask the NVIDIA driver params (MASK_NVIDIA_DRIVER_PARAMS)");
  switch (*r) {
    case MaskResult::kMasked: NVDRA_INFO("{} masked: ModifyDeviceFiles: 0", kDriverParamsPath); break;
    case MaskResult::kNoDriver: NVDRA_WARN("no {}: no driver params to mask", kDriverParamsPath); break;
    case MaskResult::kAlreadyMasked: NVDRA_INFO("{} already says ModifyDeviceFiles: 0", kDriverParamsPath); break;
  }
  return Status::Ok();
}

// A second instance on the same sockets stops before touching anything.
Status Plugin::CheckNoOtherInstance() {
  kubelet::DraPluginOptions sockets = options_.kubelet.plugin;
  sockets.driver_name = driver_;
  return kubelet::CheckNoLiveInstance(sockets).Wrap("start");
}

Status Plugin::SetUpHardware() {
  NVDRA_RETURN_IF_ERROR(MakeDirectories(plugin_dir_, 0750).Wrap("create plugin directory"));
  if (options_.MaskDriverParams()) NVDRA_RETURN_IF_ERROR(MaskOwnDriverParams());
  devices::DeviceLibOptions dopts;
  dopts.mock_hardware = options_.mock_hardware;
  dopts.mock_layout = options_.mock_layout;
  dopts.mock_root = options_.mock_state_dir.empty() ? JoinPath(plugin_dir_, "mock-driver-root")
                                                    : options_.mock_state_dir;
  dopts.container_driver_root = options_.container_driver_root;
  dopts.host_driver_root = options_.nvidia_driver_root;
  dopts.proc_devices_path = options_.proc_devices_path;
  dopts.driver_version_file = options_.driver_version_file;
  dopts.additional_xids_to_ignore = options_.additional_xids_to_ignore;
  auto lib = devices::OpenDeviceLib(dopts);
  if (!lib.ok()) return lib.status().Wrap("open device library");
  lib_ = std::move(lib).value();
  auto inventory = DiscoverWithRetry(*lib_, shutdown_);
  if (!inventory.ok()) return inventory.status().Wrap("device discovery");
  inventory_ = std::move(inventory).value();
  NVDRA_INFO("discovered {} GPU(s) with the {} backend; driver {}, clique \"{}\"", inventory_.gpus.size(),
             lib_->backend_name(), inventory_.driver_version, inventory_.clique_id);
  return SetUpDriverFiles();
}

// Driver files and hooks: discovered once here, re-discovered by the cache
// when the driver changes underneath us. Files that cannot be found are
// logged; GPU claims then fail with the reason until they appear.
Status Plugin::SetUpDriverFiles() {
  auto hook_path = devices::InstallCdiHook(options_.nvidia_cdi_hook_path, lib_->cdi_hook_source(), plugin_dir_);
  if (!hook_path.ok()) return hook_path.status().Wrap("set up the CDI hook");
  devices::DeviceLib* lib = lib_.get();
  // The plugin's own copy of the hook is put back when it is gone; a hook
  // the flag names is the toolkit's (its DaemonSet installs it again).
  devices::DriverFilesCache::HookInstaller reinstall;
  if (options_.nvidia_cdi_hook_path.empty()) {
    reinstall = [source = lib_->cdi_hook_source(), dir = plugin_dir_] {
      return devices::InstallCdiHook("", source, dir).status();
    };
  }
  driver_files_ = std::make_shared<devices::DriverFilesCache>(
      lib_->driver_root(),
      [lib, version = inventory_.driver_version, first = true]() mutable -> Result<std::string> {
        if (first) {  // the version discovery just reported
          first = false;
          return version;
        }
        auto inv = lib->Discover();
        if (!inv.ok()) return inv.status();
        return inv->driver_version;
      },
      *hook_path, std::move(reinstall));
  if (auto files = driver_files_->Files(); files.ok()) {
    NVDRA_INFO("driver {} files: {} libraries, {} binaries, {} firmware files, {} IPC sockets; hooks: {}",
               files->driver_version, files->libraries.size(), files->binaries.size(), files->firmware.size(),
               files->ipc.size(), *hook_path);
  } else {
    NVDRA_ERROR("driver files: {} (GPU claims fail until they are found)", files.status().message());
  }
  return Status::Ok();
}

Status Plugin::SetUpCdiAndLedger() {
  cdi_ = std::make_unique<cdi::CdiSpecWriter>(options_.cdi_root, "k8s." + driver_, "claim");
  NVDRA_RETURN_IF_ERROR(cdi_->EnsureRoot().Wrap("CDI root"));
  ledger::LedgerOptions lopts;
  lopts.dir = plugin_dir_;
  lopts.boot_id_path = options_.boot_id_path;
  lopts.tombstone_ttl = options_.tombstone_ttl;
  lopts.codec = &codec_;
  auto ledger = ledger::ClaimLedger::Open(lopts);
  if (!ledger.ok()) return ledger.status().Wrap("open ledger");
  ledger_ = std::move(ledger).value();
  claims_view_ = std::make_unique<driver::LedgerClaimsView>(*ledger_);
  auto report = ledger_->report();
  if (report.clean()) {
    NVDRA_INFO("ledger: {}", report.Summary());
  } else {
    NVDRA_ERROR("ledger: {}", report.Summary());
  }
  return Status::Ok();
}

Status Plugin::SetUpKubeClient() {
  auto kube = kube::NewKubeClient(options_.kube);
  if (!kube.ok()) return kube.status().Wrap("Kubernetes client configuration");
  kube_ = std::move(kube).value();
  claims_ = std::make_unique<KubeClaimSource>(*kube_);
  kube::EventRecorderOptions evopts;
  evopts.component = program_;
  evopts.instance = options_.node_name;
  events_ = std::make_unique<kube::EventRecorder>(*kube_, evopts, SystemClock::Get());
  return Status::Ok();
}

Status Plugin::SetUpKind(const KindFactory& factory) {
  KindContext ctx{options_,      gates_,        plugin_dir_,      *lib_,        inventory_, *cdi_,        *kube_,
                  driver_files_, *claims_view_, kind_companions_, *background_, shutdown_,  static_specs_};
  auto kind = factory(ctx);
  if (!kind.ok()) return kind.status().Wrap("set up device kind");
  kind_ = std::move(kind).value();
  if (follows_driver_reloads_) {
    factory_ = factory;
    auto reloadable = std::make_unique<driver::ReloadableKind>(std::move(kind_), codec_);
    reloadable_ = reloadable.get();
    kind_ = std::move(reloadable);
  }
  return Status::Ok();
}

Status Plugin::SetUpMetrics() {
  metrics::PluginMetricsOptions mopts;
  mopts.dra.driver = driver_;
  mopts.dra.node = options_.node_name;
  mopts.dra.device_types = kind_->MetricDeviceTypes();
  mopts.dra.ledger_states = {"PrepareStarted", "PrepareCompleted", "UnprepareStarted", "Tombstone"};
  mopts.http_endpoint = options_.http_endpoint;
  mopts.metrics_path = options_.metrics_path;
  auto m = metrics::PluginMetrics::Start(mopts);
  if (!m.ok()) return m.status().Wrap("metrics");
  metrics_ = std::move(m).value();
  return Status::Ok();
}

Status Plugin::StartEngineAndReconciler() {
  driver::EngineOptions eopts;
  eopts.gates = gates_;
  eopts.node_name = options_.node_name;
  eopts.on_permanent_failure = [events = events_.get()](const model::ClaimRef& c, const std::string& message) {
    Status s = events->Record({"resource.k8s.io/v1", "ResourceClaim", c.ns, c.name, c.uid}, "Warning",
                              "FailedPrepareDynamicResources", message);
    if (!s.ok()) NVDRA_VLOG(4, "event for claim {} not posted: {}", c.ToString(), s.message());
  };
  if (kind_->HasDeviceMetadata()) {
    // Upstream's layout: under the plugin's data directory, specs beside the
    // claims' CDI specs. Built whatever the gate says, so that claims
    // prepared while it was on are cleaned up after it went off.
    metadata_ = std::make_unique<driver::DeviceMetadataFiles>(driver_, plugin_dir_, options_.cdi_root);
    eopts.metadata = metadata_.get();
  }
  engine_ = std::make_unique<driver::Engine>(eopts, *ledger_, *kind_, *claims_, *cdi_, &metrics_->dra());
  // A ledger that was lost gets its entries back from the CDI specs before
  // the kubelet can ask for anything: otherwise a new claim could be given a
  // device a lost claim still holds. What fails here the reconciler retries.
  auto recovered = engine_->RecoverLostClaims();
  if (!recovered.ok()) {
    NVDRA_WARN("ledger recovery at start: {}; the reconciler retries", recovered.status().message());
  } else if (!*recovered) {
    NVDRA_WARN("ledger recovery at start is not complete; the reconciler retries and keeps every CDI spec meanwhile");
  }

  driver::ReconcilerOptions ropts;
  ropts.period = std::chrono::duration_cast<std::chrono::milliseconds>(options_.reconcile_period);
  ropts.completed_grace = std::chrono::duration_cast<std::chrono::milliseconds>(options_.completed_claim_grace);
  ropts.node_name = options_.node_name;
  ropts.group = background_.get();
  reconciler_ = std::make_unique<driver::Reconciler>(*engine_, *claims_, &metrics_->dra(), ropts);
  reconciler_->Start();
  return Status::Ok();
}

Status Plugin::StartSlicePublisher() {
  slice_readiness_ = std::make_unique<SliceReadiness>(driver_, &metrics_->dra());
  kube::SlicePublisherOptions sopts;
  sopts.events = events_.get();
  sopts.observer = slice_readiness_.get();
  // While the API server is down each sync fails at once (one request), so
  // the slices are written about this long after it answers again.
  sopts.retry_period = std::chrono::seconds(1);
  sopts.group = background_.get();
  // The watch of the node's slices says when to sync (a deletion by the
  // kubelet, an edit); the periodic resync is only a backstop.
  sopts.watch = true;
  sopts.resync_period = std::chrono::minutes(30);
  publisher_ = std::make_unique<kube::SlicePublisher>(*kube_, driver_, options_.node_name, sopts);
  publisher_->Update(kind_->PublishedDevices());
  publisher_->Start();
  kind_->SetRepublish([this] { publisher_->Update(kind_->PublishedDevices()); });
  return Status::Ok();
}

// Events from the hardware layer feed the kubelet's health stream and the
// device taints in our ResourceSlices. Monitoring that cannot start does not
// stop the plugin, where upstream's exits: claims are prepared and released
// without it (a plugin that restarts in a loop releases none), and a restart
// rarely mends what kept NVML from registering events. It is logged at
// Error, shown by nvdra_device_health_monitor{state="failed"} and by the
// "readiness" health service answering NOT_SERVING (docs/operations.md).
Status Plugin::StartHealthMonitoring(bool at_start) {
  if (options_.health_streaming) {
    std::vector<kubelet::DeviceHealth> initial;
    for (const auto& d : kind_->PublishedDevices()) {
      initial.push_back({options_.node_name, d.name, kubelet::DeviceHealthStatus::kHealthy, 0, 0, ""});
    }
    broadcaster_.Replace(initial);
  }
  // What the kind finds out itself (a GPU owing a time-slice reset) is
  // published whatever the flags: it says a device is not fit for new claims.
  own_health_ = kind_->NewOwnHealthSource();
  if (own_health_) {
    Status own = own_health_->Start(inventory_, [this](const devices::DeviceHealthEvent& e) { OnOwnHealthEvent(e); });
    if (!own.ok()) NVDRA_ERROR("the device kind's own health reports are off: {}", own.message());
  }
  bool watch = kind_->MonitorsDeviceHealth() &&
               (options_.health_streaming || gates_.Enabled(config::Gate::kNVMLDeviceHealthCheck));
  if (!watch) return Status::Ok();
  health_source_ = lib_->NewHealthSource();
  Status s = NVDRA_FAILPOINT("plugin-health-monitor-start");
  if (s.ok()) s = health_source_->Start(inventory_, [this](const devices::DeviceHealthEvent& e) { OnHealthEvent(e); });
  if (!s.ok()) {
    NVDRA_ERROR("device health monitoring failed to start; serving claims without it (no health taints, no "
                "health stream; readiness answers NOT_SERVING): {}",
                s.message());
    if (at_start) health_monitor_failure_ = s.message();
    metrics_->dra().SetHealthMonitor("failed");
    return Status::Ok();
  }
  metrics_->dra().SetHealthMonitor("running");
  return Status::Ok();
}

// What the plugin runs without: the readiness probe's answer, every reason
// that applies, joined.
Status Plugin::Readiness() const {
  std::string missing;
  auto add = [&missing](const std::string& reason) { missing += (missing.empty() ? "" : "; ") + reason; };
  if (!health_monitor_failure_.empty()) add("device health monitoring failed to start: " + health_monitor_failure_);
  if (Status slices = slice_readiness_->Ready(); !slices.ok()) add(slices.message());
  if (missing.empty()) return Status::Ok();
  return Unavailable(missing);
}

// An ignored XID is logged and becomes a taint of effect None, but the
// stream keeps what the device was: it neither recovers nor fails by it.
void Plugin::OnHealthEvent(const devices::DeviceHealthEvent& e) {
  if (driver_watcher_ && devices::IsDriverNotLoaded(Unavailable(e.message))) {
    // Not a device's health: the driver went away under NVML.
    {
      MutexLock l(nvml_gone_mu_);
      nvml_gone_ = e.message;
    }
    driver_watcher_->Trigger();
    return;
  }
  if (e.state == devices::HealthState::kNotice) {
    NVDRA_INFO("device {}: {}", e.device, e.message);
  } else if (e.state != devices::HealthState::kHealthy) {
    NVDRA_WARN("device {} is {}: {}", e.device, devices::HealthStateName(e.state), e.message);
  }
  if (options_.health_streaming && e.state != devices::HealthState::kNotice) {
    broadcaster_.Update({{options_.node_name, e.device, ToKubelet(e.state), 0, 0, e.message}});
  }
  if (kind_->OnHealthEvent(e)) publisher_->Update(kind_->PublishedDevices());
}

// The kind already reflects the change in its published devices.
void Plugin::OnOwnHealthEvent(const devices::DeviceHealthEvent& e) {
  if (e.state != devices::HealthState::kHealthy) {
    NVDRA_WARN("device {} is {}: {}", e.device, devices::HealthStateName(e.state), e.message);
  }
  if (options_.health_streaming) {
    broadcaster_.Update({{options_.node_name, e.device, ToKubelet(e.state), 0, 0, e.message}});
  }
  publisher_->Update(kind_->PublishedDevices());
}

Status Plugin::StartServers() {
  kubelet::DraPluginOptions popts = options_.kubelet.plugin;
  popts.driver_name = driver_;
  popts.health_source = options_.health_streaming ? &broadcaster_ : nullptr;
  auto server = kubelet::DraPluginServer::Start(*engine_, popts);
  if (!server.ok()) return server.status().Wrap("start kubelet plugin servers");
  server_ = std::move(server).value();

  if (options_.kubelet.healthcheck_port < 0) return Status::Ok();
  auto probe = [srv = server_.get()] { return srv->CheckLiveness(std::chrono::seconds(5)); };
  auto health = kubelet::HealthServer::Start(options_.kubelet.healthcheck_host, options_.kubelet.healthcheck_port,
                                             probe, [this] { return Readiness(); });
  if (!health.ok()) return health.status().Wrap("start health server");
  health_server_ = std::move(health).value();
  return Status::Ok();
}

int RunPlugin(const std::string& program, const ledger::KindCodec& codec, const KindFactory& factory, int argc,
              char** argv, const KindFlags& kind_flags, const KindCheck& kind_check, bool follows_driver_reloads) {
  const std::string driver = codec.driver_name();
  // glibc gives each thread that allocates its own arena (up to 8 per core),
  // which idle plugin threads hold as resident memory; the plugin's work is
  // small and mostly serial, so two arenas suffice. Set before any thread.
  mallopt(M_ARENA_MAX, 2);
  kubelet::SetReleaseMutexMode();
  // Signals are blocked before any thread starts, so only the watch's
  // thread sees them; startup's waits end as soon as one arrives.
  kubelet::ShutdownSignal::Block();
  // gRPC's closures and timers on one thread of ours instead of its pool
  // of one thread per core (kubelet/grpc_event_engine.h); the DRA calls'
  // deadlines share it.
  auto timers = std::make_shared<kubelet::TimerThread>("grpc-timers");
  kubelet::UseTimerEventEngine(timers);
  // Every kind's config kinds, in both plugins: each decodes and words
  // configs alike (the resolver refuses the other driver's kinds).
  if (Status st = RegisterNvdraConfigKinds(); !st.ok()) {
    std::cerr << program << ": " << st.message() << "\n";
    return 2;
  }
  auto config = LoadPluginConfig(program, driver, argc, argv, kind_flags, kind_check);
  if (!config.ok()) {
    if (config.status().code() == StatusCode::kAlreadyExists) return 0;  // --help / --version
    std::cerr << program << ": " << config.status().message() << "\n";
    return 2;
  }
  config->follows_driver_reloads = follows_driver_reloads;
  config->options.kubelet.plugin.timers = timers;
  auto shutdown = kubelet::ShutdownWatch::Start();
  {
    auto plugin = Plugin::Start(program, codec, std::move(config).value(), factory, *shutdown);
    if (!plugin.ok()) {
      if (int sig = shutdown->signal(); sig != 0) {
        NVDRA_INFO("received signal {} during startup, shutting down ({})", sig, plugin.status().message());
        return 0;
      }
      NVDRA_ERROR("{}", plugin.status().message());
      return 1;
    }
    // Started: only a signal is waited for now, in this thread, so the
    // watch's thread (which wakes every 100 ms) is not kept idling.
    int sig = shutdown->StopTaking();
    if (sig == 0) sig = kubelet::ShutdownSignal::Wait();
    NVDRA_INFO("received signal {}, shutting down", sig);
  }
  NVDRA_INFO("shutdown");
  return 0;
}

}  // namespace nvdra::plugin
