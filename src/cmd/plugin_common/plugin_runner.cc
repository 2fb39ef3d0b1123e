#include "cmd/plugin_common/plugin_runner.h"

#include <mutex>
#include <iostream>
#include <thread>

#include "cmd/plugin_common/kube_sources.h"
#include "config/feature_gates.h"
#include "driver/engine.h"
#include "driver/reconciler.h"
#include "kube/event_recorder.h"
#include "kube/kube_config.h"
#include "kube/slice_publisher.h"
#include "kubelet/dra_plugin_server.h"
#include "kubelet/health_server.h"
#include "kubelet/shutdown_signal.h"
#include "ledger/claim_ledger.h"
#include "metrics/plugin_metrics.h"
#include "util/file_util.h"
#include "util/log.h"

namespace nvdra::plugin {

namespace {

int Fail(const std::string& what, const Status& s) {
  spdlog::error("{}: {}", what, s.message());
  std::cerr << "error: " << what << ": " << s.message() << "\n";
  return 1;
}

kubelet::DeviceHealthStatus ToKubelet(devices::HealthState s) {
  switch (s) {
    case devices::HealthState::kHealthy: return kubelet::DeviceHealthStatus::kHealthy;
    case devices::HealthState::kUnhealthy: return kubelet::DeviceHealthStatus::kUnhealthy;
    case devices::HealthState::kUnmonitored: return kubelet::DeviceHealthStatus::kUnknown;
  }
  return kubelet::DeviceHealthStatus::kUnknown;
}

}  // namespace

int RunPlugin(const std::string& program, const std::string& driver, const KindFactory& factory, int argc,
              char** argv) {
  // Signals are blocked before any thread starts, so only Wait() sees them.
  kubelet::ShutdownSignal::Block();

  auto parsed = ParsePluginOptions(program, driver, argc, argv);
  if (!parsed.ok()) {
    if (parsed.status().code() == StatusCode::kAlreadyExists) return 0;  // --help / --version
    std::cerr << program << ": " << parsed.status().message() << "\n";
    return 2;
  }
  const PluginOptions& opts = *parsed;
  InitLogging(opts.verbosity, opts.logging_format);

  auto gates = config::FeatureGates::Parse(opts.feature_gates);
  if (!gates.ok()) {
    std::cerr << program << ": --feature-gates: " << gates.status().message() << "\n";
    return 2;
  }
  if (Status s = gates->Validate(); !s.ok()) {
    std::cerr << program << ": --feature-gates: " << s.message() << "\n";
    return 2;
  }
  spdlog::info("Starting {} for driver {} on node {}; feature gates: {}", program, driver, opts.node_name,
               gates->ToString());

  const std::string plugin_dir = opts.PluginDataDir(driver);
  if (Status s = MakeDirectories(plugin_dir, 0750); !s.ok()) return Fail("create plugin directory", s);

  // Hardware first: a failed discovery is retried, never published as an empty node.
  devices::DeviceLibOptions dopts;
  dopts.mock_hardware = opts.mock_hardware;
  dopts.mock_root = opts.mock_state_dir.empty() ? JoinPath(plugin_dir, "mock-driver-root") : opts.mock_state_dir;
  dopts.container_driver_root = opts.container_driver_root;
  dopts.host_driver_root = opts.nvidia_driver_root;
  dopts.proc_devices_path = opts.proc_devices_path;
  dopts.additional_xids_to_ignore = opts.additional_xids_to_ignore;
  auto lib = devices::OpenDeviceLib(dopts);
  if (!lib.ok()) return Fail("open device library", lib.status());
  Result<devices::NodeInventory> inventory = Internal("not discovered");
  for (int attempt = 1;; attempt++) {
    inventory = (*lib)->Discover();
    if (inventory.ok()) break;
    spdlog::error("device discovery failed (attempt {}), retrying: {}", attempt, inventory.status().message());
    if (attempt >= 30) return Fail("device discovery", inventory.status());
    std::this_thread::sleep_for(std::chrono::seconds(std::min(attempt, 10)));
  }
  spdlog::info("discovered {} GPU(s) with the {} backend; driver {}, clique \"{}\"", inventory->gpus.size(),
               (*lib)->backend_name(), inventory->driver_version, inventory->clique_id);

  cdi::CdiSpecWriter cdi(opts.cdi_root, "k8s." + driver, "claim");
  if (Status s = cdi.EnsureRoot(); !s.ok()) return Fail("CDI root", s);

  ledger::LedgerOptions lopts;
  lopts.dir = plugin_dir;
  lopts.boot_id_path = opts.boot_id_path;
  lopts.tombstone_ttl = opts.tombstone_ttl;
  auto ledger = ledger::ClaimLedger::Open(lopts);
  if (!ledger.ok()) return Fail("open ledger", ledger.status());
  {
    auto rep = (*ledger)->report();
    if (rep.clean()) {
      spdlog::info("ledger: {}", rep.Summary());
    } else {
      spdlog::error("ledger: {}", rep.Summary());
    }
  }

  auto kube = kube::NewKubeClient(opts.kube);
  if (!kube.ok()) return Fail("Kubernetes client configuration", kube.status());

  KindContext ctx{opts, plugin_dir, **lib, *inventory, **kube, **ledger};
  auto kind = factory(ctx);
  if (!kind.ok()) return Fail("set up device kind", kind.status());

  metrics::PluginMetricsOptions mopts;
  mopts.dra.driver = driver;
  mopts.dra.node = opts.node_name;
  mopts.dra.device_types = (*kind)->MetricDeviceTypes();
  mopts.dra.ledger_states = {"PrepareStarted", "PrepareCompleted", "UnprepareStarted", "Tombstone"};
  mopts.http_endpoint = opts.http_endpoint;
  mopts.metrics_path = opts.metrics_path;
  auto plugin_metrics = metrics::PluginMetrics::Start(mopts);
  if (!plugin_metrics.ok()) return Fail("metrics", plugin_metrics.status());
  metrics::DraMetrics* dra_metrics = &(*plugin_metrics)->dra();
  if (!opts.http_endpoint.empty()) {
    spdlog::info("serving metrics on port {} at {}", (*plugin_metrics)->port(), opts.metrics_path);
  }

  KubeClaimSource claims(**kube);
  kube::EventRecorderOptions evopts;
  evopts.component = program;
  evopts.instance = opts.node_name;
  kube::EventRecorder events(**kube, evopts, SystemClock::Get());
  driver::EngineOptions eopts;
  eopts.gates = *gates;
  eopts.node_name = opts.node_name;
  eopts.on_permanent_failure = [&events](const model::ClaimRef& c, const std::string& message) {
    Status s = events.Record({"resource.k8s.io/v1", "ResourceClaim", c.ns, c.name, c.uid}, "Warning",
                             "FailedPrepareDynamicResources", message);
    if (!s.ok()) NVDRA_VLOG(4, "event for claim {} not posted: {}", c.ToString(), s.message());
  };
  driver::Engine engine(eopts, **ledger, **kind, claims, cdi, dra_metrics);

  driver::ReconcilerOptions ropts;
  ropts.period = std::chrono::duration_cast<std::chrono::milliseconds>(opts.reconcile_period);
  ropts.completed_grace = std::chrono::duration_cast<std::chrono::milliseconds>(opts.completed_claim_grace);
  ropts.node_name = opts.node_name;
  driver::Reconciler reconciler(engine, claims, dra_metrics, ropts);
  reconciler.Start();

  kube::SlicePublisher publisher(**kube, driver, opts.node_name);
  publisher.Update((*kind)->PublishedDevices());
  publisher.Start();
  // Slice sync counts come from the publisher's own statistics at scrape time.
  auto synced = std::make_shared<std::pair<uint64_t, uint64_t>>(0, 0);  // reported ok, failed
  auto synced_mu = std::make_shared<std::mutex>();
  (*plugin_metrics)->registry().AddRefreshHook([&publisher, dra_metrics, synced, synced_mu] {
    std::lock_guard<std::mutex> l(*synced_mu);
    auto st = publisher.stats();
    for (; synced->first < st.syncs - st.failed_syncs; synced->first++) dra_metrics->RecordSliceSync("success");
    for (; synced->second < st.failed_syncs; synced->second++) dra_metrics->RecordSliceSync("error");
  });
  // The hook reads the publisher: the metrics server stops before the
  // publisher goes away, on every return path.
  struct StopMetricsFirst {
    metrics::PluginMetrics* m;
    ~StopMetricsFirst() { m->Stop(); }
  } stop_metrics_first{plugin_metrics->get()};

  // Device health: events from the hardware layer feed the kubelet's health
  // stream and the device taints in our ResourceSlices.
  kubelet::DeviceHealthBroadcaster broadcaster;
  std::unique_ptr<devices::DeviceHealthSource> health_source;
  if (opts.health_streaming) {
    std::vector<kubelet::DeviceHealth> initial;
    for (const auto& d : (*kind)->PublishedDevices()) {
      initial.push_back({opts.node_name, d.name, kubelet::DeviceHealthStatus::kHealthy, 0, 0, ""});
    }
    broadcaster.Replace(initial);
  }
  bool watch_health = (*kind)->MonitorsDeviceHealth() &&
                      (opts.health_streaming || gates->Enabled(config::Gate::kNVMLDeviceHealthCheck));
  if (watch_health) {
    health_source = (*lib)->NewHealthSource();
    driver::DeviceKind* k = kind->get();
    Status s = health_source->Start(
        *inventory, [&, k, node = opts.node_name](const devices::DeviceHealthEvent& e) {
          if (e.state != devices::HealthState::kHealthy) {
            spdlog::warn("device {} is {}: {}", e.device, devices::HealthStateName(e.state), e.message);
          }
          if (opts.health_streaming) broadcaster.Update({{node, e.device, ToKubelet(e.state), 0, 0, e.message}});
          if (k->OnHealthEvent(e)) publisher.Update(k->PublishedDevices());
        });
    if (!s.ok()) spdlog::error("device health monitoring is off: {}", s.message());
  }

  kubelet::DraPluginOptions popts = opts.kubelet.plugin;
  popts.driver_name = driver;
  popts.health_source = opts.health_streaming ? &broadcaster : nullptr;
  auto server = kubelet::DraPluginServer::Start(engine, popts);
  if (!server.ok()) return Fail("start kubelet plugin servers", server.status());
  spdlog::info("serving DRA on {} and registration on {}", (*server)->paths().dra, (*server)->paths().registration);

  std::unique_ptr<kubelet::HealthServer> health;
  if (opts.kubelet.healthcheck_port >= 0) {
    kubelet::DraPluginServer* srv = server->get();
    auto hs = kubelet::HealthServer::Start(opts.kubelet.healthcheck_host, opts.kubelet.healthcheck_port,
                                           [srv] { return srv->CheckLiveness(std::chrono::seconds(5)); });
    if (!hs.ok()) return Fail("start health server", hs.status());
    health = std::move(hs).value();
    spdlog::info("serving gRPC health on port {}", health->port());
  }

  int sig = kubelet::ShutdownSignal::Wait();
  spdlog::info("received signal {}, shutting down", sig);
  if (health) health->Stop();
  (*server)->Stop();
  if (health_source) health_source->Stop();
  broadcaster.Close();
  publisher.Stop();
  reconciler.Stop();
  (*plugin_metrics)->Stop();
  spdlog::info("shutdown");
  return 0;
}

}  // namespace nvdra::plugin
