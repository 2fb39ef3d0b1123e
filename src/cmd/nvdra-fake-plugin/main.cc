// nvdra-fake-plugin: the kubelet-facing surface of a DRA driver with a
// scripted fake engine instead of devices. For integration and end-to-end
// tests only. Prints one JSON line on stdout once its sockets are published:
//   {"dra_socket": "...", "registration_socket": "...", "healthcheck_port": N}
// then one line per engine call as it starts:
//   {"started": "prepare", "uid": "..."}
// and serves until SIGTERM/SIGINT, then removes its own sockets.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <iostream>

#include "kubelet/dra_plugin_server.h"
#include "kubelet/fake_claim_engine.h"
#include "kubelet/health_server.h"
#include "kubelet/kubelet_flags.h"
#include "kubelet/grpc_event_engine.h"
#include "kubelet/shutdown_signal.h"
#include "util/file_util.h"
#include "util/log.h"
#include "util/mutex.h"

using namespace nvdra;
using namespace nvdra::kubelet;

namespace {

// "pool/device=HEALTHY[:message],..." -> health entries.
Result<std::vector<DeviceHealth>> ParseDeviceHealth(const std::string& spec) {
  std::vector<DeviceHealth> out;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    auto slash = item.find('/');
    auto eq = item.find('=');
    if (slash == std::string::npos || eq == std::string::npos || eq < slash) {
      return InvalidArgument("--device-health entries look like pool/device=HEALTHY, got " + item);
    }
    DeviceHealth h;
    h.pool = item.substr(0, slash);
    h.device = item.substr(slash + 1, eq - slash - 1);
    std::string state = item.substr(eq + 1);
    if (auto colon = state.find(':'); colon != std::string::npos) {
      h.message = state.substr(colon + 1);
      state = state.substr(0, colon);
    }
    if (state == "HEALTHY") h.health = DeviceHealthStatus::kHealthy;
    else if (state == "UNHEALTHY") h.health = DeviceHealthStatus::kUnhealthy;
    else if (state == "UNKNOWN") h.health = DeviceHealthStatus::kUnknown;
    else return InvalidArgument("unknown health state " + state + " (HEALTHY, UNHEALTHY, UNKNOWN)");
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  ShutdownSignal::Block();
  // As the plugins do, so that the benchmark's floor runs the same gRPC.
  UseTimerEventEngine();
  CLI::App app{"nvdra-fake-plugin: the kubelet surface over a scripted fake engine (tests only)"};
  KubeletFlags flags;
  flags.plugin.driver_name = "gpu.nvidia.com";
  AddKubeletFlags(app, flags);
  int verbosity = 0;
  std::string script_file;
  std::string device_health;
  bool health_streaming = false;
  int claim_timeout_ms = 0;
  app.add_option("--driver-name", flags.plugin.driver_name, "DRA driver name");
  app.add_option("--healthcheck-host", flags.healthcheck_host, "address the health endpoint listens on");
  app.add_option("--script", script_file, "fake engine script (JSON, see fake_claim_engine.h)");
  app.add_option("--device-health", device_health, "pool/device=HEALTHY|UNHEALTHY|UNKNOWN[:msg],... (enables health streaming)");
  app.add_flag("--health-streaming", health_streaming, "serve and advertise DRAResourceHealth");
  app.add_option("--claim-timeout-ms", claim_timeout_ms, "per-claim deadline in ms (overrides --claim-timeout)");
  app.add_option("-v", verbosity, "log verbosity");
  CLI11_PARSE(app, argc, argv);
  InitLogging(verbosity);
  FinishKubeletFlags(flags);
  DraPluginOptions& opts = flags.plugin;
  if (claim_timeout_ms > 0) opts.dispatcher.claim_timeout = std::chrono::milliseconds(claim_timeout_ms);

  FakeClaimEngine engine;
  Mutex stdout_mu;  // one JSON line at a time
  engine.SetOnStart([&stdout_mu](const std::string& op, const ClaimRef& claim) {
    MutexLock lock(stdout_mu);
    std::cout << nlohmann::json{{"started", op}, {"uid", claim.uid}}.dump() << std::endl;
  });
  FakeClaimBehavior def;
  def.devices.push_back({{"req"}, "fake-pool", "gpu-0", {"k8s.gpu.nvidia.com/device=gpu-0"}, ""});
  engine.SetDefault(def);
  if (!script_file.empty()) {
    auto text = ReadFileToString(script_file);
    if (!text.ok()) {
      std::cerr << text.status().ToString() << "\n";
      return 2;
    }
    if (Status s = engine.LoadScript(*text); !s.ok()) {
      std::cerr << s.ToString() << "\n";
      return 2;
    }
  }
  DeviceHealthBroadcaster health;
  if (!device_health.empty() || health_streaming) {
    auto entries = ParseDeviceHealth(device_health);
    if (!entries.ok()) {
      std::cerr << entries.status().ToString() << "\n";
      return 2;
    }
    health.Replace(std::move(*entries));
    opts.health_source = &health;
  }

  auto server = DraPluginServer::Start(engine, opts);
  if (!server.ok()) {
    std::cerr << server.status().ToString() << "\n";
    return 1;
  }
  std::unique_ptr<HealthServer> liveness;
  if (flags.healthcheck_port >= 0) {
    DraPluginServer* s = server->get();
    auto h = HealthServer::Start(flags.healthcheck_host, flags.healthcheck_port,
                                 [s] { return s->CheckLiveness(std::chrono::seconds(5)); });
    if (!h.ok()) {
      std::cerr << h.status().ToString() << "\n";
      return 1;
    }
    liveness = std::move(*h);
  }
  nlohmann::json ready{{"dra_socket", (*server)->paths().dra},
                       {"registration_socket", (*server)->paths().registration},
                       {"healthcheck_port", liveness ? liveness->port() : -1}};
  {
    MutexLock lock(stdout_mu);
    std::cout << ready.dump() << std::endl;
  }

  int sig = ShutdownSignal::Wait();
  NVDRA_INFO("signal {}: shutting down", sig);
  if (liveness) liveness->Stop();
  health.Close();
  engine.CancelAll();
  (*server)->Stop();
  return 0;
}
