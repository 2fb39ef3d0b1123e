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

#include "kubelet/abseil_mutex_mode.h"
#include "kubelet/dra_plugin_server.h"
#include "kubelet/fake_claim_engine.h"
#include "kubelet/grpc_event_engine.h"
#include "kubelet/health_server.h"
#include "kubelet/kubelet_flags.h"
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

struct FakePluginFlags {
  KubeletFlags kubelet;
  int verbosity = 0;
  std::string script_file;
  std::string device_health;
  bool health_streaming = false;
  int claim_timeout_ms = 0;
};

void AddFakePluginFlags(CLI::App& app, FakePluginFlags& f) {
  f.kubelet.plugin.driver_name = "gpu.nvidia.com";
  AddKubeletFlags(app, f.kubelet);
  app.add_option("--driver-name", f.kubelet.plugin.driver_name, "DRA driver name");
  app.add_option("--healthcheck-host", f.kubelet.healthcheck_host, "address the health endpoint listens on");
  app.add_option("--script", f.script_file, "fake engine script (JSON, see fake_claim_engine.h)");
  app.add_option("--device-health", f.device_health,
                 "pool/device=HEALTHY|UNHEALTHY|UNKNOWN[:msg],... (enables health streaming)");
  app.add_flag("--health-streaming", f.health_streaming, "serve and advertise DRAResourceHealth");
  app.add_option("--claim-timeout-ms", f.claim_timeout_ms, "per-claim deadline in ms (overrides --claim-timeout)");
  app.add_option("-v", f.verbosity, "log verbosity");
}

// Announces each engine call on stdout, serves one prepared device by
// default, then applies --script.
Status SetUpEngine(FakeClaimEngine& engine, Mutex& stdout_mu, const std::string& script_file) {
  engine.SetOnStart([&stdout_mu](const std::string& op, const ClaimRef& claim) {
    // The same line as an object's dump(), without building the object: the
    // fake plugin is the floor bench/instructions measures plugins against.
    const std::string line = "{\"started\":" + nlohmann::json(op).dump() +
                             ",\"uid\":" + nlohmann::json(claim.uid).dump() + "}\n";
    MutexLock lock(stdout_mu);
    std::cout << line << std::flush;
  });
  FakeClaimBehavior def;
  def.devices.push_back({{"req"}, "fake-pool", "gpu-0", {"k8s.gpu.nvidia.com/device=gpu-0"}, ""});
  engine.SetDefault(def);
  if (script_file.empty()) return Status::Ok();
  auto text = ReadFileToString(script_file);
  if (!text.ok()) return text.status();
  return engine.LoadScript(*text);
}

// With --device-health or --health-streaming, serves the given health.
Status SetUpHealth(const FakePluginFlags& f, DeviceHealthBroadcaster& health, DraPluginOptions& opts) {
  if (f.device_health.empty() && !f.health_streaming) return Status::Ok();
  auto entries = ParseDeviceHealth(f.device_health);
  if (!entries.ok()) return entries.status();
  health.Replace(std::move(*entries));
  opts.health_source = &health;
  return Status::Ok();
}

// The liveness endpoint on --healthcheck-port; null when the port is negative.
Result<std::unique_ptr<HealthServer>> StartLiveness(const KubeletFlags& flags, DraPluginServer* s) {
  if (flags.healthcheck_port < 0) return std::unique_ptr<HealthServer>();
  return HealthServer::Start(flags.healthcheck_host, flags.healthcheck_port,
                             [s] { return s->CheckLiveness(std::chrono::seconds(5)); });
}

void PrintReady(Mutex& stdout_mu, const DraPluginServer& server, const HealthServer* liveness) {
  nlohmann::json ready{{"dra_socket", server.paths().dra},
                       {"registration_socket", server.paths().registration},
                       {"healthcheck_port", liveness ? liveness->port() : -1}};
  MutexLock lock(stdout_mu);
  std::cout << ready.dump() << std::endl;
}

int Fail(const Status& s, int exit_code) {
  std::cerr << s.ToString() << "\n";
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  ShutdownSignal::Block();
  // As the plugins do, so that the benchmark's floor runs the same gRPC
  // (signals are blocked first: the timer thread must not take them).
  auto timers = std::make_shared<TimerThread>("grpc-timers");
  UseTimerEventEngine(timers);
  SetReleaseMutexMode();
  CLI::App app{"nvdra-fake-plugin: the kubelet surface over a scripted fake engine (tests only)"};
  FakePluginFlags f;
  AddFakePluginFlags(app, f);
  CLI11_PARSE(app, argc, argv);
  InitLogging(f.verbosity);
  FinishKubeletFlags(f.kubelet);
  DraPluginOptions& opts = f.kubelet.plugin;
  opts.timers = timers;
  if (f.claim_timeout_ms > 0) opts.dispatcher.claim_timeout = std::chrono::milliseconds(f.claim_timeout_ms);

  FakeClaimEngine engine;
  Mutex stdout_mu;  // one JSON line at a time
  if (Status s = SetUpEngine(engine, stdout_mu, f.script_file); !s.ok()) return Fail(s, 2);
  DeviceHealthBroadcaster health;
  if (Status s = SetUpHealth(f, health, opts); !s.ok()) return Fail(s, 2);

  auto server = DraPluginServer::Start(engine, opts);
  if (!server.ok()) return Fail(server.status(), 1);
  auto liveness = StartLiveness(f.kubelet, server->get());
  if (!liveness.ok()) return Fail(liveness.status(), 1);
  PrintReady(stdout_mu, **server, liveness->get());

  int sig = ShutdownSignal::Wait();
  NVDRA_INFO("signal {}: shutting down", sig);
  if (*liveness) (*liveness)->Stop();
  health.Close();
  engine.CancelAll();
  (*server)->Stop();
  return 0;
}
