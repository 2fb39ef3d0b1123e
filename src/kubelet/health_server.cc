#include "kubelet/health_server.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include "kubelet/proto/grpc_health/v1/health.grpc.pb.h"
#include "kubelet/server_threads.h"
#include "util/log.h"
#include "util/run_guarded.h"

namespace nvdra::kubelet {

class HealthServer::Service final : public ::grpc::health::v1::Health::Service {
 public:
  Service(Probe probe, Probe readiness) : probe_(std::move(probe)), readiness_(std::move(readiness)) {}

  grpc::Status Check(grpc::ServerContext*, const ::grpc::health::v1::HealthCheckRequest* req,
                     ::grpc::health::v1::HealthCheckResponse* resp) override {
    if (req->service() == "readiness" && readiness_) return CheckReadiness(resp);
    if (!req->service().empty() && req->service() != "liveness") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service");
    }
    Status s = RunGuarded("the liveness probe", [&] { return probe_(); });
    if (s.ok()) {
      NVDRA_VLOG(7, "liveness check: serving");
      resp->set_status(::grpc::health::v1::HealthCheckResponse::SERVING);
    } else {
      NVDRA_ERROR("liveness check failed: {}", s.message());
      resp->set_status(::grpc::health::v1::HealthCheckResponse::NOT_SERVING);
    }
    return grpc::Status::OK;
  }

 private:
  // Ready: alive, and nothing the plugin serves without is missing. Not
  // ready is logged at V(4) only: the reason was logged at Error when it
  // came about, and probes repeat every few seconds.
  grpc::Status CheckReadiness(::grpc::health::v1::HealthCheckResponse* resp) {
    Status s = RunGuarded("the liveness probe", [&] { return probe_(); });
    if (s.ok()) s = RunGuarded("the readiness probe", [&] { return readiness_(); });
    if (s.ok()) {
      resp->set_status(::grpc::health::v1::HealthCheckResponse::SERVING);
    } else {
      NVDRA_VLOG(4, "readiness check: not ready: {}", s.message());
      resp->set_status(::grpc::health::v1::HealthCheckResponse::NOT_SERVING);
    }
    return grpc::Status::OK;
  }

  Probe probe_;
  Probe readiness_;
};

Result<std::unique_ptr<HealthServer>> HealthServer::Start(const std::string& host, int port,
                                                          Probe probe, Probe readiness) {
  if (port < 0 || port > 65535) {
    return InvalidArgument(fmt::format("health check port {} is out of range 0..65535", port));
  }
  std::unique_ptr<HealthServer> h(new HealthServer());
  h->service_ = std::make_unique<Service>(std::move(probe), std::move(readiness));
  grpc::ServerBuilder builder;
  LimitServerThreads(builder);
  builder.AddListeningPort(fmt::format("{}:{}", host, port), grpc::InsecureServerCredentials(),
                           &h->port_);
  builder.RegisterService(h->service_.get());
  h->server_ = builder.BuildAndStart();
  if (!h->server_ || h->port_ == 0) {
    return Unavailable(fmt::format("cannot listen for health checks on {}:{} (port in use?)", host, port));
  }
  NVDRA_INFO("liveness endpoint grpc.health.v1.Health/Check on {}:{}", host, h->port_);
  return h;
}

HealthServer::~HealthServer() { Stop(); }

void HealthServer::Stop() {
  if (!server_) return;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server_->Wait();
  server_.reset();
}

}  // namespace nvdra::kubelet
