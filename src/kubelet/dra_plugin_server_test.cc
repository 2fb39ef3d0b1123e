// The surface over real Unix sockets, driven through PluginClient exactly as
// the kubelet would.
#include "kubelet/dra_plugin_server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <future>

#include "kubelet/fake_claim_engine.h"
#include "kubelet/plugin_client.h"
#include "kubelet/registration_service.h"
#include "kubelet/test_util.h"
#include "util/file_util.h"

namespace nvdra::kubelet {
namespace {

using testing::Claim;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::Uid;
constexpr auto kTimeout = std::chrono::seconds(10);

class DraPluginServerTest : public ::testing::Test {
 protected:
  DraPluginOptions Options(const std::string& id = "") {
    DraPluginOptions o;
    o.driver_name = "gpu.nvidia.com";
    o.plugins_dir = dir_.path() + "/plugins";
    o.registrar_dir = dir_.path() + "/registry";
    o.rolling_update_id = id;
    o.dispatcher.workers = 4;
    return o;
  }
  std::unique_ptr<DraPluginServer> Start(DraPluginOptions o) {
    auto s = DraPluginServer::Start(engine_, std::move(o));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }

  ::nvdra::testing::TempDir dir_{testing::kShortTempPrefix};
  FakeClaimEngine engine_;
};

TEST_F(DraPluginServerTest, SocketNamesFollowTheKubeletConventions) {
  auto p = SocketPathsFor(Options());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->dra, dir_.path() + "/plugins/gpu.nvidia.com/dra.sock");
  EXPECT_EQ(p->registration, dir_.path() + "/registry/gpu.nvidia.com-reg.sock");
  auto r = SocketPathsFor(Options("0f3c-77"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->dra, dir_.path() + "/plugins/gpu.nvidia.com/dra-0f3c-77.sock");
  EXPECT_EQ(r->registration, dir_.path() + "/registry/gpu.nvidia.com-0f3c-77-reg.sock");
  EXPECT_FALSE(SocketPathsFor(Options("../x")).ok());
  DraPluginOptions bad = Options();
  bad.driver_name = "GPU/x";
  EXPECT_FALSE(SocketPathsFor(bad).ok());
}

TEST_F(DraPluginServerTest, GetInfoAdvertisesDraVersionsAndEndpoint) {
  auto server = Start(Options());
  auto info = PluginClient(server->paths().registration).GetInfo(kTimeout);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->type, "DRAPlugin");
  EXPECT_EQ(info->name, "gpu.nvidia.com");
  EXPECT_EQ(info->endpoint, server->paths().dra);
  EXPECT_THAT(info->supported_versions, ElementsAre("v1.DRAPlugin", "v1beta1.DRAPlugin"));
  EXPECT_TRUE(ValidatePluginInfo(*info, "gpu.nvidia.com").empty());
  EXPECT_FALSE(ValidatePluginInfo(*info, "compute-domain.nvidia.com").empty());
}

TEST_F(DraPluginServerTest, HealthStreamingIsAdvertisedOnlyWhenEnabled) {
  DeviceHealthBroadcaster health;
  DraPluginOptions o = Options();
  o.health_source = &health;
  auto server = Start(o);
  auto info = PluginClient(server->paths().registration).GetInfo(kTimeout);
  ASSERT_TRUE(info.ok());
  EXPECT_THAT(info->supported_versions,
              ElementsAre("v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"));
}

TEST_F(DraPluginServerTest, GetInfoAnswersWhileTheEngineIsBusy) {
  FakeClaimBehavior held;
  held.hold = true;
  engine_.SetDefault(held);
  DraPluginOptions o = Options();
  o.dispatcher.workers = 1;  // the only worker is stuck
  auto server = Start(o);
  PluginClient dra(server->paths().dra);
  auto busy = std::async(std::launch::async, [&] { return dra.Prepare(DraApi::kV1, {Claim("a")}, kTimeout); });
  ASSERT_TRUE(engine_.WaitStarted(Uid("a"), kTimeout));
  // The kubelet gives GetInfo one second and does not retry.
  std::chrono::nanoseconds slowest{0};
  for (int i = 0; i < 20; ++i) {
    auto start = std::chrono::steady_clock::now();
    auto info = PluginClient(server->paths().registration).GetInfo(std::chrono::milliseconds(1000));
    slowest = std::max(slowest, std::chrono::steady_clock::now() - start);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
  }
  RecordProperty("slowest_getinfo_us",
                 static_cast<int>(std::chrono::duration_cast<std::chrono::microseconds>(slowest).count()));
  engine_.Release(Uid("a"));
  EXPECT_TRUE(busy.get().ok());
}

TEST_F(DraPluginServerTest, RejectedRegistrationIsAnErrorAndRemembered) {
  auto server = Start(Options());
  PluginClient reg(server->paths().registration);
  Status s = reg.NotifyRegistrationStatus(false, "version mismatch", kTimeout);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("failed registration process: version mismatch"));
  ASSERT_TRUE(server->registration().LastStatus().has_value());
  EXPECT_FALSE(server->registration().LastStatus()->registered);
  EXPECT_TRUE(reg.NotifyRegistrationStatus(true, "", kTimeout).ok());
  EXPECT_TRUE(server->registration().LastStatus()->registered);
}

// An engine whose failures carry no message: the wire's empty error means
// success to the kubelet, so such a failure must still say something.
class SilentFailureEngine final : public ClaimEngine {
 public:
  PrepareOutcome PrepareClaim(const ClaimRef&, std::chrono::steady_clock::time_point) override {
    return Status(StatusCode::kUnavailable, "");
  }
  Status UnprepareClaim(const ClaimRef&, std::chrono::steady_clock::time_point) override {
    return Status(StatusCode::kInternal, "");
  }
};

TEST_F(DraPluginServerTest, AFailureWithoutMessageNeverReadsAsSuccess) {
  SilentFailureEngine engine;
  auto server = DraPluginServer::Start(engine, Options());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  PluginClient dra((*server)->paths().dra);
  for (DraApi api : {DraApi::kV1, DraApi::kV1beta1}) {
    auto r = dra.Prepare(api, {Claim("a")}, kTimeout);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->at(Uid("a")).error, "Unavailable");
    auto u = dra.Unprepare(api, {Claim("a")}, kTimeout);
    ASSERT_TRUE(u.ok()) << u.status().ToString();
    EXPECT_EQ(u->at(Uid("a")), "Internal");
  }
}

TEST_F(DraPluginServerTest, ThrowingEngineFailsThatClaimAloneOnBothApis) {
  FakeClaimBehavior boom;
  boom.throw_message = "map::at";
  engine_.Set(Uid("a"), boom);
  auto server = Start(Options());
  PluginClient dra(server->paths().dra);
  for (DraApi api : {DraApi::kV1, DraApi::kV1beta1}) {
    auto r = dra.Prepare(api, {Claim("a"), Claim("b")}, kTimeout);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_THAT(r->at(Uid("a")).error, HasSubstr("unexpected exception: map::at"));
    EXPECT_TRUE(r->at(Uid("a")).devices.empty());
    EXPECT_EQ(r->at(Uid("b")).error, "");
    auto u = dra.Unprepare(api, {Claim("a"), Claim("b")}, kTimeout);
    ASSERT_TRUE(u.ok()) << u.status().ToString();
    EXPECT_THAT(u->at(Uid("a")), HasSubstr("internal error in unprepare of claim"));
    EXPECT_EQ(u->at(Uid("b")), "");
  }
  EXPECT_TRUE(PluginClient(server->paths().registration).GetInfo(kTimeout).ok());
}

TEST_F(DraPluginServerTest, V1ReportsShareIdAndV1beta1DoesNot) {
  FakeClaimBehavior b;
  b.devices = {{{"gpus/large"}, "node-a", "gpu-1", {"k8s.gpu.nvidia.com/claim=x"}, std::string("share-7")},
               {{"gpus"}, "node-a", "gpu-0", {"k8s.gpu.nvidia.com/claim=x"}, ""},
               {{"gpus"}, "node-a", "gpu-0", {"k8s.gpu.nvidia.com/claim=x"}, ""}};
  engine_.SetDefault(b);
  auto server = Start(Options());
  PluginClient dra(server->paths().dra);
  auto v1 = dra.Prepare(DraApi::kV1, {Claim("a")}, kTimeout);
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  const auto& d1 = v1->at(Uid("a")).devices;
  ASSERT_EQ(d1.size(), 2u);          // deduplicated
  EXPECT_EQ(d1[0].device, "gpu-0");  // sorted
  EXPECT_TRUE(d1[0].share_id.empty());
  EXPECT_EQ(d1[1].device, "gpu-1");
  EXPECT_EQ(d1[1].share_id, "share-7");
  EXPECT_THAT(d1[1].requests, ElementsAre("gpus"));  // subrequest stripped
  EXPECT_THAT(d1[1].cdi_device_ids, ElementsAre("k8s.gpu.nvidia.com/claim=x"));

  auto v1beta1 = dra.Prepare(DraApi::kV1beta1, {Claim("a")}, kTimeout);
  ASSERT_TRUE(v1beta1.ok());
  const auto& d2 = v1beta1->at(Uid("a")).devices;
  ASSERT_EQ(d2.size(), 2u);
  EXPECT_TRUE(d2[1].share_id.empty());
  EXPECT_THAT(d2[1].requests, ElementsAre("gpus"));
}

TEST_F(DraPluginServerTest, WireContractForBadInput) {
  auto server = Start(Options());
  PluginClient dra(server->paths().dra);
  auto empty_uid = dra.Prepare(DraApi::kV1, {Claim("a"), {"default", "", "b"}}, kTimeout);
  ASSERT_FALSE(empty_uid.ok());
  EXPECT_THAT(empty_uid.status().message(), HasSubstr("INVALID_ARGUMENT"));
  auto mixed = dra.Unprepare(DraApi::kV1beta1, {Claim("a"), {"default", "../x", "b"}, Claim("a")}, kTimeout);
  ASSERT_TRUE(mixed.ok());
  ASSERT_EQ(mixed->size(), 2u);
  EXPECT_THAT(mixed->at(Uid("a")), HasSubstr("appears 2 times"));
  EXPECT_THAT(mixed->at("../x"), HasSubstr("not a valid Kubernetes UID"));
  EXPECT_TRUE(engine_.Completed().empty());
}

TEST_F(DraPluginServerTest, ConcurrentCallsDoNotWaitForASlowClaim) {
  FakeClaimBehavior held;
  held.hold = true;
  engine_.Set(Uid("slow"), held);
  auto server = Start(Options());
  PluginClient dra(server->paths().dra);
  auto slow = std::async(std::launch::async, [&] { return dra.Prepare(DraApi::kV1, {Claim("slow")}, kTimeout); });
  ASSERT_TRUE(engine_.WaitStarted(Uid("slow"), kTimeout));
  auto fast = dra.Prepare(DraApi::kV1beta1, {Claim("fast")}, kTimeout);
  ASSERT_TRUE(fast.ok());
  EXPECT_EQ(fast->at(Uid("fast")).error, "");
  EXPECT_EQ(engine_.Completed(), std::vector<std::string>({"prepare:" + Uid("fast")}));
  engine_.Release(Uid("slow"));
  EXPECT_TRUE(slow.get().ok());
}

TEST_F(DraPluginServerTest, ReplacesStaleSocketsAndRemovesThemOnStop) {
  auto paths = SocketPathsFor(Options());
  ASSERT_TRUE(MakeDirectories(dir_.path() + "/plugins/gpu.nvidia.com").ok());
  ASSERT_TRUE(MakeDirectories(dir_.path() + "/registry").ok());
  for (const auto& p : {paths->dra, paths->registration}) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, p.c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ::close(fd);  // leaves a stale socket file behind
  }
  auto server = Start(Options());
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(PluginClient(paths->registration).GetInfo(kTimeout).ok());
  EXPECT_TRUE(server->CheckLiveness(kTimeout).ok());
  server->Stop();
  EXPECT_FALSE(PathExists(paths->dra));
  EXPECT_FALSE(PathExists(paths->registration));
  auto listing = ListDirectory(dir_.path() + "/plugins/gpu.nvidia.com");
  ASSERT_TRUE(listing.ok());
  EXPECT_TRUE(listing->empty());  // no temporary bind names left either
}

// A second instance on the same names used to take them over; the first
// then lost its sockets and, on stopping, could delete the second's.
TEST_F(DraPluginServerTest, SecondInstanceOnTheSameSocketsRefusesToStart) {
  auto first = Start(Options());
  auto second = DraPluginServer::Start(engine_, Options());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr("another gpu.nvidia.com plugin is running"));
  EXPECT_THAT(second.status().message(), HasSubstr("--rolling-update-id"));
  EXPECT_FALSE(CheckNoLiveInstance(Options()).ok());
  EXPECT_TRUE(first->CheckLiveness(kTimeout).ok());
  EXPECT_TRUE(PluginClient(first->paths().dra).Prepare(DraApi::kV1, {Claim("a")}, kTimeout).ok());
  first->Stop();
  EXPECT_TRUE(CheckNoLiveInstance(Options()).ok());
  auto again = Start(Options());  // once the first is gone, a new one starts
  EXPECT_TRUE(again->CheckLiveness(kTimeout).ok());
}

TEST_F(DraPluginServerTest, SocketsGetTheirModeWhateverTheUmask) {
  mode_t old_umask = ::umask(0);
  auto server = Start(Options());
  ::umask(old_umask);
  for (const auto& p : {server->paths().dra, server->paths().registration}) {
    struct stat st {};
    ASSERT_EQ(::lstat(p.c_str(), &st), 0) << p;
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 07777, kSocketMode) << p;
  }
}

TEST_F(DraPluginServerTest, RollingUpdateInstancesServeSideBySide) {
  auto a = Start(Options("pod-a"));
  auto b = Start(Options("pod-b"));
  EXPECT_NE(a->paths().dra, b->paths().dra);
  auto ia = PluginClient(a->paths().registration).GetInfo(kTimeout);
  auto ib = PluginClient(b->paths().registration).GetInfo(kTimeout);
  ASSERT_TRUE(ia.ok() && ib.ok());
  EXPECT_EQ(ia->endpoint, a->paths().dra);
  EXPECT_EQ(ib->endpoint, b->paths().dra);
  a->Stop();
  EXPECT_TRUE(b->CheckLiveness(kTimeout).ok());
  EXPECT_FALSE(PathExists(a->paths().dra));
}

TEST_F(DraPluginServerTest, LivenessFailsWhenASocketIsGone) {
  auto server = Start(Options());
  ASSERT_TRUE(server->CheckLiveness(kTimeout).ok());
  ASSERT_EQ(::unlink(server->paths().dra.c_str()), 0);
  Status s = server->CheckLiveness(kTimeout);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("dra.sock"));
}

TEST_F(DraPluginServerTest, HealthStreamSendsStateThenChanges) {
  DeviceHealthBroadcaster health;
  health.Replace({{"node-a", "gpu-0", DeviceHealthStatus::kHealthy, 100, 0, ""},
                  {"node-a", "gpu-1", DeviceHealthStatus::kHealthy, 100, 0, ""}});
  DraPluginOptions o = Options();
  o.health_source = &health;
  auto server = Start(o);
  for (HealthApi api : {HealthApi::kV1, HealthApi::kV1alpha1}) {
    std::vector<std::vector<DeviceHealth>> got;
    Status s = PluginClient(server->paths().dra).WatchHealth(api, kTimeout, [&](const auto& devices) {
      got.push_back(devices);
      if (got.size() == 1) {
        health.Update({{"node-a", "gpu-1", DeviceHealthStatus::kUnhealthy, 200, 60, "xid 79"}});
        return true;
      }
      return false;
    });
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(got.size(), 2u);
    ASSERT_EQ(got[0].size(), 2u);
    EXPECT_EQ(got[0][1].health, DeviceHealthStatus::kHealthy);
    ASSERT_EQ(got[1].size(), 2u);
    EXPECT_EQ(got[1][1].health, DeviceHealthStatus::kUnhealthy);
    EXPECT_EQ(got[1][1].last_updated_unix, 200);
    EXPECT_EQ(got[1][1].message, api == HealthApi::kV1 ? "xid 79" : "");  // v1alpha1 has no message
    health.Update({{"node-a", "gpu-1", DeviceHealthStatus::kHealthy, 300, 0, ""}});
  }
}

TEST_F(DraPluginServerTest, HealthStreamIsNotServedWhenDisabled) {
  auto server = Start(Options());
  Status s = PluginClient(server->paths().dra).WatchHealth(HealthApi::kV1, kTimeout, [](const auto&) { return false; });
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("UNIMPLEMENTED"));
}

}  // namespace
}  // namespace nvdra::kubelet
