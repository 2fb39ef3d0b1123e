#include "kubelet/health_server.h"

#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>
#include <stdexcept>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "kubelet/dra_plugin_server.h"
#include "kubelet/fake_claim_engine.h"
#include "kubelet/proto/grpc_health/v1/health.grpc.pb.h"
#include "kubelet/test_util.h"

namespace nvdra::kubelet {
namespace {

using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;

// Returns the serving status, or -1 - grpc code for an RPC error.
int Check(int port, const std::string& service) {
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  auto stub = ::grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  HealthCheckRequest req;
  req.set_service(service);
  HealthCheckResponse resp;
  grpc::Status s = stub->Check(&ctx, req, &resp);
  if (!s.ok()) return -1 - static_cast<int>(s.error_code());
  return resp.status();
}

TEST(HealthServerTest, ReportsTheProbeForLivenessServicesOnly) {
  std::atomic<bool> healthy{true};
  auto h = HealthServer::Start("127.0.0.1", 0,
                               [&] { return healthy ? Status::Ok() : Unavailable("dra.sock is gone"); });
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  const int port = (*h)->port();
  ASSERT_GT(port, 0);
  EXPECT_EQ(Check(port, ""), HealthCheckResponse::SERVING);
  EXPECT_EQ(Check(port, "liveness"), HealthCheckResponse::SERVING);
  EXPECT_EQ(Check(port, "readiness"), -1 - static_cast<int>(grpc::StatusCode::NOT_FOUND));
  healthy = false;
  EXPECT_EQ(Check(port, "liveness"), HealthCheckResponse::NOT_SERVING);
}

// Readiness: alive and not degraded. A degraded plugin stays alive, so the
// kubelet does not restart it for what a restart would not mend.
TEST(HealthServerTest, ReadinessNeedsLivenessAndTheReadinessProbe) {
  std::atomic<bool> alive{true}, complete{true};
  auto h = HealthServer::Start(
      "127.0.0.1", 0, [&] { return alive ? Status::Ok() : Unavailable("dra.sock is gone"); },
      [&] { return complete ? Status::Ok() : Unavailable("device health monitoring failed to start"); });
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  const int port = (*h)->port();
  EXPECT_EQ(Check(port, "readiness"), HealthCheckResponse::SERVING);
  complete = false;
  EXPECT_EQ(Check(port, "readiness"), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(Check(port, "liveness"), HealthCheckResponse::SERVING);
  complete = true;
  alive = false;
  EXPECT_EQ(Check(port, "readiness"), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(Check(port, "other"), -1 - static_cast<int>(grpc::StatusCode::NOT_FOUND));
}

// A probe that hangs holds its own worker only: other checks are still
// answered, and the worker ends once checks stop coming.
TEST(HealthServerTest, AProbeThatHangsHoldsNoGrpcThreadAndItsWorkerEndsWhenIdle) {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false, entered = false;
  auto h = HealthServer::Start("127.0.0.1", 0, [&] {
    std::unique_lock l(mu);
    entered = true;
    cv.notify_all();
    cv.wait(l, [&] { return release; });
    return Status::Ok();
  });
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  const int port = (*h)->port();
  EXPECT_EQ((*h)->probe_threads(), 0);
  std::thread blocked([&] { EXPECT_EQ(Check(port, "liveness"), HealthCheckResponse::SERVING); });
  {
    std::unique_lock l(mu);
    cv.wait(l, [&] { return entered; });
  }
  EXPECT_EQ((*h)->probe_threads(), 1);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(Check(port, "other"), -1 - static_cast<int>(grpc::StatusCode::NOT_FOUND));
  }
  {
    std::lock_guard l(mu);
    release = true;
  }
  cv.notify_all();
  blocked.join();
  EXPECT_EQ(Check(port, ""), HealthCheckResponse::SERVING);
  // The worker's idle exit is two seconds.
  EXPECT_TRUE((*h)->WaitUntilNoProbeThreads(std::chrono::steady_clock::now() + std::chrono::seconds(20)));
  EXPECT_EQ((*h)->probe_threads(), 0);
}

TEST(HealthServerTest, NotServingWhenThePluginSocketsBreak) {
  ::nvdra::testing::TempDir dir{testing::kShortTempPrefix};
  FakeClaimEngine engine;
  DraPluginOptions o;
  o.driver_name = "compute-domain.nvidia.com";
  o.plugins_dir = dir.path() + "/p";
  o.registrar_dir = dir.path() + "/r";
  auto server = DraPluginServer::Start(engine, o);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  DraPluginServer* s = server->get();
  auto h = HealthServer::Start("127.0.0.1", 0, [s] { return s->CheckLiveness(std::chrono::seconds(5)); });
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(Check((*h)->port(), "liveness"), HealthCheckResponse::SERVING);
  (*server)->Stop();
  EXPECT_EQ(Check((*h)->port(), "liveness"), HealthCheckResponse::NOT_SERVING);
}

TEST(HealthServerTest, ThrowingProbeIsNotServingAndTheServerLives) {
  std::atomic<bool> throws{true};
  auto h = HealthServer::Start("127.0.0.1", 0, [&]() -> Status {
    if (throws) throw std::runtime_error("probe bug");
    return Status::Ok();
  });
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(Check((*h)->port(), "liveness"), HealthCheckResponse::NOT_SERVING);
  throws = false;
  EXPECT_EQ(Check((*h)->port(), "liveness"), HealthCheckResponse::SERVING);
}

TEST(HealthServerTest, RefusesABadPort) {
  EXPECT_FALSE(HealthServer::Start("127.0.0.1", 70000, [] { return Status::Ok(); }).ok());
}

}  // namespace
}  // namespace nvdra::kubelet
