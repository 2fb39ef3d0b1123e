// End-to-end over real Unix sockets: the nvdra-fake-plugin binary (the
// surface over a scripted engine) driven by the real nvdractl, exactly as
// the kubelet would drive a plugin. Synchronisation is by the plugin's
// readiness line, process exits and held claims, never by sleeping.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "kubelet/proto/grpc_health/v1/health.grpc.pb.h"
#include "kubelet/test_util.h"
#include "util/file_util.h"
#include "util/test_paths.h"

extern char** environ;

namespace nvdra::kubelet {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::Uid;

const std::string kBin = NVDRA_BIN_DIR;

// A child process with its stdout on a pipe.
class Process {
 public:
  explicit Process(std::vector<std::string> argv) {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ), 0) << argv[0];
    posix_spawn_file_actions_destroy(&fa);
    ::close(fds[1]);
    out_fd_ = fds[0];
  }
  ~Process() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      Wait();
    }
    if (out_fd_ >= 0) ::close(out_fd_);
  }

  // The next line of stdout ("" at EOF or after `timeout_ms`).
  std::string ReadLine(int timeout_ms = 20000) {
    for (;;) {
      auto nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return line;
      }
      pollfd p{out_fd_, POLLIN, 0};
      if (::poll(&p, 1, timeout_ms) <= 0) return "";
      char chunk[4096];
      ssize_t n = ::read(out_fd_, chunk, sizeof(chunk));
      if (n <= 0) return "";
      buf_.append(chunk, n);
    }
  }
  std::string ReadAll() {
    char chunk[4096];
    ssize_t n;
    while ((n = ::read(out_fd_, chunk, sizeof(chunk))) > 0) buf_.append(chunk, n);
    std::string all = std::move(buf_);
    buf_.clear();
    return all;
  }
  // Exit status (or 128 + signal).
  int Wait() {
    int st = 0;
    ::waitpid(pid_, &st, 0);
    exited_ = true;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  bool Running() {
    int st = 0;
    return !exited_ && ::waitpid(pid_, &st, WNOHANG) == 0;
  }
  void Signal(int sig) { ::kill(pid_, sig); }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  bool exited_ = false;
  std::string buf_;
};

struct CtlResult {
  int rc;
  json out;
};

CtlResult Ctl(std::vector<std::string> args) {
  args.insert(args.begin(), kBin + "/nvdractl");
  Process p(args);
  std::string text = p.ReadAll();
  int rc = p.Wait();
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return {rc, j};
}

class FakePlugin {
 public:
  FakePlugin(const std::string& dir, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv{kBin + "/nvdra-fake-plugin",
                                  "--kubelet-plugins-directory-path",
                                  dir + "/plugins",
                                  "--kubelet-registrar-directory-path",
                                  dir + "/registry",
                                  "--healthcheck-host",
                                  "127.0.0.1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    proc_ = std::make_unique<Process>(argv);
    std::string line = proc_->ReadLine();
    ready_ = json::parse(line, nullptr, false);
    EXPECT_TRUE(ready_.is_object()) << "plugin did not start: " << line;
  }
  std::string dra() const { return ready_.is_object() ? ready_.value("dra_socket", "") : ""; }
  std::string reg() const { return ready_.is_object() ? ready_.value("registration_socket", "") : ""; }
  int health_port() const { return ready_.is_object() ? ready_.value("healthcheck_port", -1) : -1; }
  Process& proc() { return *proc_; }
  int Terminate() {
    proc_->Signal(SIGTERM);
    return proc_->Wait();
  }

 private:
  std::unique_ptr<Process> proc_;
  json ready_;
};

std::string WriteScript(const std::string& dir, const json& script) {
  std::string path = dir + "/script.json";
  EXPECT_TRUE(WriteFileAtomically(path, script.dump(), 0644, false).ok());
  return path;
}

std::string ClaimArg(const std::string& tag) { return "default/claim-" + tag + "/" + Uid(tag); }

class KubeletIntegrationTest : public ::testing::Test {
 protected:
  ::nvdra::testing::TempDir dir_{testing::kShortTempPrefix};
};

TEST_F(KubeletIntegrationTest, RegisterPrepareUnprepareLikeTheKubelet) {
  json script;
  script["claims"][Uid("a")] = json::parse(R"({"devices": [
      {"request_names": ["gpus/large"], "pool": "node-a", "device": "gpu-1",
       "cdi_device_ids": ["k8s.gpu.nvidia.com/claim=a"], "share_id": "s-1"},
      {"request_names": ["gpus"], "pool": "node-a", "device": "gpu-0",
       "cdi_device_ids": ["k8s.gpu.nvidia.com/claim=a"]}]})");
  FakePlugin plugin(dir_.path(), {"--script", WriteScript(dir_.path(), script)});
  auto reg = Ctl({"register", "--socket", plugin.reg(), "--driver", "gpu.nvidia.com"});
  ASSERT_EQ(reg.rc, 0) << reg.out.dump();
  EXPECT_EQ(reg.out["info"]["endpoint"], plugin.dra());
  EXPECT_EQ(reg.out["info"]["supported_versions"], json({"v1.DRAPlugin", "v1beta1.DRAPlugin"}));
  EXPECT_TRUE(reg.out["registered"].get<bool>());

  auto v1 = Ctl({"prepare", "--socket", plugin.dra(), ClaimArg("a")});
  ASSERT_EQ(v1.rc, 0) << v1.out.dump();
  const json& devices = v1.out["claims"][0]["devices"];
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0]["device_name"], "gpu-0");
  EXPECT_FALSE(devices[0].contains("share_id"));
  EXPECT_EQ(devices[1]["device_name"], "gpu-1");
  EXPECT_EQ(devices[1]["share_id"], "s-1");
  EXPECT_EQ(devices[1]["request_names"], json({"gpus"}));

  auto v1beta1 = Ctl({"prepare", "--api", "v1beta1", "--socket", plugin.dra(), ClaimArg("a")});
  ASSERT_EQ(v1beta1.rc, 0);
  EXPECT_FALSE(v1beta1.out["claims"][0]["devices"][1].contains("share_id"));
  EXPECT_EQ(v1beta1.out["claims"][0]["devices"][1]["device_name"], "gpu-1");

  auto un = Ctl({"unprepare", "--socket", plugin.dra(), ClaimArg("a"), ClaimArg("unknown")});
  ASSERT_EQ(un.rc, 0) << un.out.dump();
  EXPECT_EQ(un.out["claims"].size(), 2u);
  EXPECT_EQ(un.out["claims"][1]["error"], "");
  EXPECT_EQ(plugin.Terminate(), 0);
}

TEST_F(KubeletIntegrationTest, ClaimErrorsExitOneAndMalformedRequestsExitTwo) {
  json script;
  script["claims"][Uid("bad")]["prepare_error"] = "GPU gpu-3 fell off the bus";
  FakePlugin plugin(dir_.path(), {"--script", WriteScript(dir_.path(), script), "--max-claims-per-request", "4"});
  auto r = Ctl({"prepare", "--socket", plugin.dra(), ClaimArg("ok"), ClaimArg("bad"), "default/x/../../etc",
                ClaimArg("ok")});
  ASSERT_EQ(r.rc, 1) << r.out.dump();
  ASSERT_EQ(r.out["claims"].size(), 3u);
  // The repeated UID gets one answer: an error, not a second prepare.
  EXPECT_THAT(r.out["claims"][0]["error"].get<std::string>(), HasSubstr("appears 2 times"));
  EXPECT_EQ(r.out["claims"][1]["error"], "GPU gpu-3 fell off the bus");
  EXPECT_THAT(r.out["claims"][2]["error"].get<std::string>(), HasSubstr("not a valid Kubernetes UID"));

  auto empty = Ctl({"prepare", "--socket", plugin.dra(), "default/x/"});
  EXPECT_EQ(empty.rc, 2);
  EXPECT_THAT(empty.out["rpc_error"].get<std::string>(), HasSubstr("INVALID_ARGUMENT"));

  auto huge = Ctl({"unprepare", "--socket", plugin.dra(), ClaimArg("1"), ClaimArg("2"), ClaimArg("3"), ClaimArg("4"),
                   ClaimArg("5")});
  EXPECT_EQ(huge.rc, 1);
  ASSERT_EQ(huge.out["claims"].size(), 5u);
  EXPECT_THAT(huge.out["claims"][4]["error"].get<std::string>(),
              HasSubstr("has 5 claims, more than the limit of 4 per call"));

  auto nobody = Ctl({"prepare", "--socket", dir_.path() + "/nothing.sock", ClaimArg("a")});
  EXPECT_EQ(nobody.rc, 2);
  EXPECT_THAT(nobody.out["rpc_error"].get<std::string>(), HasSubstr("UNAVAILABLE"));
}

TEST_F(KubeletIntegrationTest, SlowClaimMissesItsDeadlineWithoutDelayingOthers) {
  json script;
  script["claims"][Uid("slow")]["hold"] = true;
  FakePlugin plugin(dir_.path(), {"--script", WriteScript(dir_.path(), script), "--claim-timeout-ms", "60000"});
  // The held claim's call stays open...
  Process slow({kBin + "/nvdractl", "prepare", "--socket", plugin.dra(), ClaimArg("slow")});
  EXPECT_EQ(json::parse(plugin.proc().ReadLine()), json({{"started", "prepare"}, {"uid", Uid("slow")}}));
  // ...while other calls, and registration, are answered.
  auto fast = Ctl({"prepare", "--socket", plugin.dra(), ClaimArg("fast")});
  EXPECT_EQ(fast.rc, 0) << fast.out.dump();
  auto reg = Ctl({"register", "--socket", plugin.reg()});
  EXPECT_EQ(reg.rc, 0);
  EXPECT_TRUE(slow.Running());
  // Shutdown answers the waiting call with an error (the fake engine gives
  // up its held claim) and cleans up.
  EXPECT_EQ(plugin.Terminate(), 0);
  json out = json::parse(slow.ReadAll(), nullptr, false);
  EXPECT_EQ(slow.Wait(), 1);
  EXPECT_THAT(out["claims"][0]["error"].get<std::string>(),
              ::testing::AnyOf(HasSubstr("shutting down"), HasSubstr("cancelled")))
      << out.dump();
  EXPECT_FALSE(PathExists(plugin.dra()));
}

TEST_F(KubeletIntegrationTest, DeadlineExpiryIsAClearRetryableError) {
  json script;
  script["claims"][Uid("slow")]["hold"] = true;
  FakePlugin plugin(dir_.path(), {"--script", WriteScript(dir_.path(), script), "--claim-timeout-ms", "300"});
  auto r = Ctl({"prepare", "--socket", plugin.dra(), ClaimArg("slow"), ClaimArg("fast")});
  ASSERT_EQ(r.rc, 1);
  EXPECT_EQ(r.out["claims"][0]["error"],
            "prepare of claim default/claim-slow:" + Uid("slow") +
                " did not finish within 300ms; it goes on in the background and the kubelet will retry");
  EXPECT_EQ(r.out["claims"][1]["error"], "");
  EXPECT_EQ(plugin.Terminate(), 0);
}

TEST_F(KubeletIntegrationTest, SigtermRemovesSocketsAndStaleOnesAreReplaced) {
  std::string dra, reg;
  {
    FakePlugin crashed(dir_.path());
    dra = crashed.dra();
    reg = crashed.reg();
    crashed.proc().Signal(SIGKILL);  // no cleanup: stale sockets stay
    EXPECT_EQ(crashed.proc().Wait(), 128 + SIGKILL);
  }
  ASSERT_TRUE(PathExists(dra));
  ASSERT_TRUE(PathExists(reg));
  FakePlugin plugin(dir_.path());
  EXPECT_EQ(Ctl({"register", "--socket", reg}).rc, 0);
  EXPECT_EQ(Ctl({"prepare", "--socket", dra, ClaimArg("a")}).rc, 0);
  EXPECT_EQ(plugin.Terminate(), 0);
  EXPECT_FALSE(PathExists(dra));
  EXPECT_FALSE(PathExists(reg));
}

// Two real plugin processes on the same sockets (same driver, no distinct
// --rolling-update-id): the second used to take the names over, and the
// first then deleted them on exit. Now the second refuses to start.
TEST_F(KubeletIntegrationTest, SecondPluginOnTheSameSocketsRefusesToStart) {
  FakePlugin first(dir_.path());
  Process second({kBin + "/nvdra-fake-plugin", "--kubelet-plugins-directory-path", dir_.path() + "/plugins",
                  "--kubelet-registrar-directory-path", dir_.path() + "/registry", "--healthcheck-host", "127.0.0.1"});
  EXPECT_EQ(second.ReadLine(), "");  // no readiness line: it never served
  EXPECT_NE(second.Wait(), 0);
  ASSERT_TRUE(PathExists(first.dra()));
  ASSERT_TRUE(PathExists(first.reg()));
  auto reg = Ctl({"register", "--socket", first.reg()});
  EXPECT_EQ(reg.rc, 0) << reg.out.dump();
  EXPECT_EQ(Ctl({"prepare", "--socket", first.dra(), ClaimArg("a")}).rc, 0);
  EXPECT_EQ(first.Terminate(), 0);
  EXPECT_FALSE(PathExists(first.dra()));
  EXPECT_FALSE(PathExists(first.reg()));
  // With the first gone, the same command line starts.
  FakePlugin next(dir_.path());
  EXPECT_EQ(Ctl({"register", "--socket", next.reg()}).rc, 0);
  EXPECT_EQ(next.Terminate(), 0);
}

TEST_F(KubeletIntegrationTest, RollingUpdatePodsServeSideBySide) {
  FakePlugin a(dir_.path(), {"--rolling-update-id", "pod-a"});
  FakePlugin b(dir_.path(), {"--rolling-update-id", "pod-b"});
  EXPECT_EQ(a.dra(), dir_.path() + "/plugins/gpu.nvidia.com/dra-pod-a.sock");
  EXPECT_EQ(b.reg(), dir_.path() + "/registry/gpu.nvidia.com-pod-b-reg.sock");
  auto ra = Ctl({"register", "--socket", a.reg()});
  auto rb = Ctl({"register", "--socket", b.reg()});
  ASSERT_EQ(ra.rc, 0);
  ASSERT_EQ(rb.rc, 0);
  EXPECT_EQ(ra.out["info"]["endpoint"], a.dra());
  EXPECT_EQ(rb.out["info"]["endpoint"], b.dra());
  EXPECT_EQ(a.Terminate(), 0);
  EXPECT_EQ(Ctl({"prepare", "--socket", b.dra(), ClaimArg("x")}).rc, 0);
  EXPECT_EQ(b.Terminate(), 0);
}

TEST_F(KubeletIntegrationTest, RejectedRegistrationIsAnsweredWithAnError) {
  FakePlugin plugin(dir_.path());
  auto r = Ctl({"register", "--socket", plugin.reg(), "--reject", "incompatible kubelet"});
  EXPECT_EQ(r.rc, 0);
  EXPECT_THAT(r.out["notify_error"].get<std::string>(), HasSubstr("failed registration process: incompatible kubelet"));
  auto wrong = Ctl({"register", "--socket", plugin.reg(), "--driver", "compute-domain.nvidia.com"});
  EXPECT_EQ(wrong.rc, 1);
  EXPECT_EQ(wrong.out["problems"].size(), 1u);
}

TEST_F(KubeletIntegrationTest, LivenessProbeFollowsTheSockets) {
  FakePlugin plugin(dir_.path(), {"--healthcheck-port", "0"});
  ASSERT_GT(plugin.health_port(), 0);
  auto check = [&](const std::string& service) {
    auto stub = ::grpc::health::v1::Health::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(plugin.health_port()), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    ::grpc::health::v1::HealthCheckRequest req;
    req.set_service(service);
    ::grpc::health::v1::HealthCheckResponse resp;
    grpc::Status s = stub->Check(&ctx, req, &resp);
    return s.ok() ? static_cast<int>(resp.status()) : -1;
  };
  EXPECT_EQ(check("liveness"), ::grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(check(""), ::grpc::health::v1::HealthCheckResponse::SERVING);
  ASSERT_EQ(::unlink(plugin.reg().c_str()), 0);
  EXPECT_EQ(check("liveness"), ::grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(plugin.Terminate(), 0);
}

TEST_F(KubeletIntegrationTest, WatchHealthStreamsDeviceHealth) {
  FakePlugin plugin(dir_.path(), {"--device-health", "node-a/gpu-0=HEALTHY,node-a/gpu-1=UNHEALTHY:xid 79"});
  auto reg = Ctl({"register", "--socket", plugin.reg()});
  EXPECT_EQ(reg.out["info"]["supported_versions"].size(), 4u);
  Process watch({kBin + "/nvdractl", "watch-health", "--socket", plugin.dra(), "--count", "1"});
  json msg = json::parse(watch.ReadLine(), nullptr, false);
  EXPECT_EQ(watch.Wait(), 0);
  ASSERT_EQ(msg["devices"].size(), 2u);
  EXPECT_EQ(msg["devices"][1]["device_name"], "gpu-1");
  EXPECT_EQ(msg["devices"][1]["health"], "UNHEALTHY");
  EXPECT_EQ(msg["devices"][1]["message"], "xid 79");
  EXPECT_EQ(plugin.Terminate(), 0);

  FakePlugin plain(dir_.path());
  EXPECT_EQ(Ctl({"watch-health", "--socket", plain.dra(), "--count", "1"}).rc, 2);
}

}  // namespace
}  // namespace nvdra::kubelet
