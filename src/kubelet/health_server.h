// The liveness endpoint the upstream Helm chart probes: the standard
// grpc.health.v1.Health/Check on TCP --healthcheck-port. Service "" and
// "liveness" run the plugin's probe (which dials its own sockets), as
// upstream. Service "readiness", nvdra's own, runs the liveness probe and
// then the readiness probe (what the plugin runs degraded without, such as
// device health monitoring that failed to start); without a readiness probe
// it is NOT_FOUND, and so is any other service name, like upstream.
#pragma once

#include <grpcpp/server.h>

#include <functional>
#include <memory>
#include <string>

#include "kubelet/worker_pool.h"
#include "util/status.h"

namespace nvdra::kubelet {

class HealthServer {
 public:
  using Probe = std::function<Status()>;

  // `host`: "[::]" for all interfaces (upstream's behaviour), "127.0.0.1"
  // in tests. `port` 0 picks a free port (see port()).
  static Result<std::unique_ptr<HealthServer>> Start(const std::string& host, int port, Probe probe,
                                                     Probe readiness = nullptr);
  ~HealthServer();

  int port() const { return port_; }
  void Stop();
  // Threads running probes now: one while checks come, none when idle.
  int probe_threads();
  // Waits (until `deadline`) for the probe worker to end once checks stop.
  bool WaitUntilNoProbeThreads(std::chrono::steady_clock::time_point deadline);

 private:
  class Service;
  HealthServer() = default;

  std::unique_ptr<WorkerPool> worker_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace nvdra::kubelet
