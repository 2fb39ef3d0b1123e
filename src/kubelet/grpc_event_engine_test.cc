// TimerEventEngine: closures run on its one thread in order of their time,
// a cancelled task never runs, and an engine released by its own closure
// ends cleanly; and gRPC serves and calls over a Unix socket with it as
// the only EventEngine.
#include "kubelet/grpc_event_engine.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

#include "kubelet/proto/grpc_health/v1/health.grpc.pb.h"
#include "kubelet/test_util.h"
#include "util/mutex.h"
#include "util/test_temp_dir.h"

namespace nvdra::kubelet {
namespace {

using namespace std::chrono_literals;
using Engine = grpc_event_engine::experimental::EventEngine;

// Collects values from closures and waits for a count of them.
class Log {
 public:
  void Add(int v) EXCLUDES(mu_) {
    MutexLock l(mu_);
    values_.push_back(v);
    cv_.NotifyAll();
  }
  std::vector<int> WaitFor(size_t n) EXCLUDES(mu_) {
    MutexLock l(mu_);
    cv_.WaitFor(mu_, 30s, [&]() REQUIRES(mu_) { return values_.size() >= n; });
    return values_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::vector<int> values_ GUARDED_BY(mu_);
};

class Liveness final : public ::grpc::health::v1::Health::Service {
  grpc::Status Check(grpc::ServerContext*, const ::grpc::health::v1::HealthCheckRequest*,
                     ::grpc::health::v1::HealthCheckResponse* resp) override {
    resp->set_status(::grpc::health::v1::HealthCheckResponse::SERVING);
    return grpc::Status::OK;
  }
};

// First in this binary, before gRPC has made an engine of its own.
TEST(TimerEventEngineTest, GrpcServesAndCallsOverAUnixSocketWithIt) {
  static std::atomic<int> made{0};
  grpc_event_engine::experimental::SetEventEngineFactory([]() -> std::unique_ptr<Engine> {
    made++;
    return std::make_unique<TimerEventEngine>();
  });
  {
    nvdra::testing::TempDir dir(testing::kShortTempPrefix);
    Liveness service;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + dir.path() + "/ee.sock", grpc::InsecureServerCredentials());
    builder.RegisterService(&service);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    ASSERT_NE(server, nullptr);
    auto stub = ::grpc::health::v1::Health::NewStub(grpc::CreateChannel("unix:" + dir.path() + "/ee.sock",
                                                                        grpc::InsecureChannelCredentials()));
    for (int i = 0; i < 20; ++i) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + 10s);
      ::grpc::health::v1::HealthCheckRequest req;
      ::grpc::health::v1::HealthCheckResponse resp;
      ASSERT_TRUE(stub->Check(&ctx, req, &resp).ok());
      EXPECT_EQ(resp.status(), ::grpc::health::v1::HealthCheckResponse::SERVING);
    }
    EXPECT_GT(made.load(), 0);  // gRPC took its engine from the factory
    server->Shutdown(std::chrono::system_clock::now() + 1s);
  }
  grpc_event_engine::experimental::EventEngineFactoryReset();
}

TEST(TimerEventEngineTest, RunsOnItsOwnThreadInOrderOfTime) {
  TimerEventEngine engine;
  Log log;
  std::atomic<bool> on_worker{false};
  EXPECT_FALSE(engine.IsWorkerThread());
  engine.RunAfter(60ms, [&] { log.Add(3); });
  engine.RunAfter(20ms, [&] { log.Add(2); });
  engine.Run([&] {
    on_worker = engine.IsWorkerThread();
    log.Add(1);
  });
  EXPECT_EQ(log.WaitFor(3), (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(on_worker.load());
}

TEST(TimerEventEngineTest, ACancelledTaskNeverRuns) {
  TimerEventEngine engine;
  Log log;
  Engine::TaskHandle late = engine.RunAfter(1h, [&] { log.Add(99); });
  Engine::TaskHandle soon = engine.RunAfter(0ms, [&] { log.Add(1); });
  EXPECT_TRUE(engine.Cancel(late));
  EXPECT_FALSE(engine.Cancel(late));  // already cancelled
  EXPECT_EQ(log.WaitFor(1), std::vector<int>{1});
  EXPECT_FALSE(engine.Cancel(soon));  // already ran
  // A handle of another engine is not this one's to cancel.
  TimerEventEngine other;
  Engine::TaskHandle theirs = other.RunAfter(1h, [] {});
  EXPECT_FALSE(engine.Cancel(theirs));
  EXPECT_TRUE(other.Cancel(theirs));
}

TEST(TimerEventEngineTest, AnEngineReleasedByItsOwnClosureEndsCleanly) {
  auto engine = std::make_shared<TimerEventEngine>();
  std::promise<void> done;
  auto* raw = engine.get();
  raw->Run([keep = std::move(engine), &done]() mutable {
    keep.reset();  // the last reference: the engine goes inside its own closure
    done.set_value();
  });
  ASSERT_EQ(done.get_future().wait_for(30s), std::future_status::ready);
}

class NoConfig final : public grpc_event_engine::experimental::EndpointConfig {
 public:
  absl::optional<int> GetInt(absl::string_view) const override { return absl::nullopt; }
  absl::optional<absl::string_view> GetString(absl::string_view) const override { return absl::nullopt; }
  void* GetVoidPointer(absl::string_view) const override { return nullptr; }
};

TEST(TimerEventEngineTest, ListenConnectAndLookupAreRefusedNotCrashed) {
  TimerEventEngine engine;
  std::promise<absl::Status> connected;
  engine.Connect([&](absl::StatusOr<std::unique_ptr<Engine::Endpoint>> r) { connected.set_value(r.status()); },
                 Engine::ResolvedAddress(), NoConfig(), grpc_event_engine::experimental::MemoryAllocator(), 1s);
  auto f = connected.get_future();
  ASSERT_EQ(f.wait_for(30s), std::future_status::ready);
  EXPECT_EQ(f.get().code(), absl::StatusCode::kUnimplemented);
  std::promise<absl::Status> looked_up;
  auto resolver = engine.GetDNSResolver({});
  resolver->LookupHostname(
      [&](absl::StatusOr<std::vector<Engine::ResolvedAddress>> r) { looked_up.set_value(r.status()); }, "localhost",
      "443", 1s);
  auto g = looked_up.get_future();
  ASSERT_EQ(g.wait_for(30s), std::future_status::ready);
  EXPECT_EQ(g.get().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace nvdra::kubelet
