#include "kubelet/health_server.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include "kubelet/proto/grpc_health/v1/health.grpc.pb.h"
#include "util/log.h"
#include "util/run_guarded.h"

namespace nvdra::kubelet {

// A callback service: a check holds no gRPC thread while its probe runs. The
// probe dials the plugin's own sockets, whose calls are served on gRPC's
// callback threads, so it runs on the server's probe worker instead (one
// thread, ended when no check came for a while), never on a callback thread.
class HealthServer::Service final : public ::grpc::health::v1::Health::CallbackService {
 public:
  Service(Probe probe, Probe readiness, WorkerPool& worker)
      : probe_(std::move(probe)), readiness_(std::move(readiness)), worker_(worker) {}

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* ctx, const ::grpc::health::v1::HealthCheckRequest* req,
                                  ::grpc::health::v1::HealthCheckResponse* resp) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    const bool readiness = req->service() == "readiness" && readiness_;
    if (!readiness && !req->service().empty() && req->service() != "liveness") {
      reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service"));
      return reactor;
    }
    const bool queued = worker_.Submit([this, reactor, resp, readiness] {
      resp->set_status(readiness ? CheckReadiness() : CheckLiveness());
      reactor->Finish(grpc::Status::OK);
    });
    if (!queued) reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the plugin is stopping"));
    return reactor;
  }

 private:
  using Serving = ::grpc::health::v1::HealthCheckResponse::ServingStatus;

  Serving CheckLiveness() {
    Status s = RunGuarded("the liveness probe", [&] { return probe_(); });
    if (s.ok()) {
      NVDRA_VLOG(7, "liveness check: serving");
      return ::grpc::health::v1::HealthCheckResponse::SERVING;
    }
    NVDRA_ERROR("liveness check failed: {}", s.message());
    return ::grpc::health::v1::HealthCheckResponse::NOT_SERVING;
  }

  // Ready: alive, and nothing the plugin serves without is missing. Not
  // ready is logged at V(4) only: the reason was logged at Error when it
  // came about, and probes repeat every few seconds.
  Serving CheckReadiness() {
    Status s = RunGuarded("the liveness probe", [&] { return probe_(); });
    if (s.ok()) s = RunGuarded("the readiness probe", [&] { return readiness_(); });
    if (s.ok()) return ::grpc::health::v1::HealthCheckResponse::SERVING;
    NVDRA_VLOG(4, "readiness check: not ready: {}", s.message());
    return ::grpc::health::v1::HealthCheckResponse::NOT_SERVING;
  }

  Probe probe_;
  Probe readiness_;
  WorkerPool& worker_;
};

Result<std::unique_ptr<HealthServer>> HealthServer::Start(const std::string& host, int port, Probe probe,
                                                          Probe readiness) {
  if (port < 0 || port > 65535) {
    return InvalidArgument(fmt::format("health check port {} is out of range 0..65535", port));
  }
  std::unique_ptr<HealthServer> h(new HealthServer());
  h->worker_ = std::make_unique<WorkerPool>(1);
  h->service_ = std::make_unique<Service>(std::move(probe), std::move(readiness), *h->worker_);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(fmt::format("{}:{}", host, port), grpc::InsecureServerCredentials(), &h->port_);
  builder.RegisterService(h->service_.get());
  h->server_ = builder.BuildAndStart();
  if (!h->server_ || h->port_ == 0) {
    return Unavailable(fmt::format("cannot listen for health checks on {}:{} (port in use?)", host, port));
  }
  NVDRA_INFO("liveness endpoint grpc.health.v1.Health/Check on {}:{}", host, h->port_);
  return h;
}

HealthServer::~HealthServer() { Stop(); }

// The worker stays until the server has stopped: a check already queued
// finishes its call, which the server's shutdown waits for.
void HealthServer::Stop() {
  if (!server_) return;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server_->Wait();
  server_.reset();
  worker_->Shutdown();
}

int HealthServer::probe_threads() { return worker_ ? worker_->live_threads() : 0; }

bool HealthServer::WaitUntilNoProbeThreads(std::chrono::steady_clock::time_point deadline) {
  return !worker_ || worker_->WaitUntilNoThreads(deadline);
}

}  // namespace nvdra::kubelet
