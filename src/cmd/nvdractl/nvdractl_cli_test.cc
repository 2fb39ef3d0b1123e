// Runs the real nvdractl binary: its documented exit status for bad
// arguments, and the hints it gives when a socket answers UNIMPLEMENTED
// (the wrong socket, or health streaming that is off).
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "cmd/nvdractl/nvdractl_test_util.h"
#include "kubelet/dra_plugin_server.h"
#include "kubelet/fake_claim_engine.h"
#include "kubelet/proto/dra/v1/api.grpc.pb.h"
#include "kubelet/proto/pluginregistration/api.grpc.pb.h"
#include "kubelet/test_util.h"
#include "util/test_paths.h"
#include "util/test_temp_dir.h"

namespace nvdra::ctl {
namespace {

using testing::CtlRun;
using testing::Nvdractl;

TEST(NvdractlCliTest, BadArgumentsExitTwo) {
  for (const char* args :
       {"", "no-such-command", "prepare default/a/uid", "prepare --socket", "--bogus ledger show /tmp",
        "prepare --socket /tmp/x.sock --api v9 default/a/uid", "ledger show"}) {
    CtlRun r = Nvdractl(args);
    EXPECT_EQ(r.exit_code, 2) << "nvdractl " << args << "\n" << r.out;
  }
  CtlRun help = Nvdractl("--help");
  EXPECT_EQ(help.exit_code, 0) << help.out;
  EXPECT_NE(help.out.find("Exit status"), std::string::npos) << help.out;
  CtlRun sub_help = Nvdractl("prepare --help");
  EXPECT_EQ(sub_help.exit_code, 0) << sub_help.out;
}

TEST(NvdractlCliTest, VersionPrintsVersionCommitAndDateLikeThePlugins) {
  CtlRun r = Nvdractl("--version");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("nvdra ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("\ncommit: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\ndate: "), std::string::npos) << r.out;
}

TEST(NvdractlCliTest, EachSubcommandsHelpShowsItsOwnExitStatusOnly) {
  const std::string generic = "the plugin answered but something in the answer failed";
  CtlRun top = Nvdractl("--help");
  EXPECT_NE(top.out.find(generic), std::string::npos) << top.out;
  for (const char* sub : {"ledger verify", "ledger show", "probe", "prepare", "watch-health", "cycle"}) {
    CtlRun r = Nvdractl(std::string(sub) + " --help");
    EXPECT_EQ(r.exit_code, 0) << sub << "\n" << r.out;
    EXPECT_EQ(r.out.find(generic), std::string::npos) << "nvdractl " << sub << " --help\n" << r.out;
  }
  EXPECT_NE(Nvdractl("ledger verify --help").out.find("exit 1 on damage, 2 if there is no ledger"), std::string::npos);
  EXPECT_NE(Nvdractl("probe --help").out.find("Exit status: 0 SERVING"), std::string::npos);
}

TEST(NvdractlCliTest, AnUnknownCommandIsNamed) {
  CtlRun r = Nvdractl("bogus");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("unknown command \"bogus\" for nvdractl (commands: ledger, "), std::string::npos) << r.out;
  CtlRun nested = Nvdractl("-v 2 ledger bogus /tmp");
  EXPECT_EQ(nested.exit_code, 2) << nested.out;
  EXPECT_NE(nested.out.find("unknown command \"bogus\" for nvdractl ledger (commands: show, verify, rebuild, "
                            "export-upstream)"),
            std::string::npos)
      << nested.out;
  CtlRun missing = Nvdractl("ledger");
  EXPECT_EQ(missing.exit_code, 2) << missing.out;
}

TEST(NvdractlCliTest, ProbeRefusesAnAddressWithoutAUsablePort) {
  CtlRun r = Nvdractl("probe --address 127.0.0.1");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("127.0.0.1 has no port: give host:port"), std::string::npos) << r.out;
  for (const char* bad : {"127.0.0.1:0", "127.0.0.1:http", "[::1]:70000"}) {
    CtlRun p = Nvdractl(std::string("probe --address ") + bad);
    EXPECT_EQ(p.exit_code, 2) << bad << "\n" << p.out;
    EXPECT_NE(p.out.find("is not a number from 1 to 65535"), std::string::npos) << p.out;
  }
}

class NvdractlHintTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kubelet::DraPluginOptions o;
    o.driver_name = "gpu.nvidia.com";
    o.plugins_dir = dir_.path() + "/plugins";
    o.registrar_dir = dir_.path() + "/registry";
    auto s = kubelet::DraPluginServer::Start(engine_, o);  // health streaming off
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
  }
  std::string dra() const { return server_->paths().dra; }
  std::string reg() const { return server_->paths().registration; }

  ::nvdra::testing::TempDir dir_{kubelet::testing::kShortTempPrefix};
  kubelet::FakeClaimEngine engine_;
  std::unique_ptr<kubelet::DraPluginServer> server_;
};

// nvdra answers on both of its sockets from one server, but a plugin that
// serves each socket from a server of its own (as upstream's does) answers
// UNIMPLEMENTED on the wrong one: two servers, each with only its socket's
// service (gRPC's generated bases), stand in for it at the paths such a
// plugin uses.
class NvdractlWrongSocketHintTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::create_directories(dir_.path() + "/plugins/gpu.nvidia.com"));
    ASSERT_TRUE(std::filesystem::create_directories(dir_.path() + "/registry"));
    dra_ = Serve(dir_.path() + "/plugins/gpu.nvidia.com/dra.sock", &dra_service_);
    reg_ = Serve(dir_.path() + "/registry/gpu.nvidia.com-reg.sock", &reg_service_);
    ASSERT_TRUE(dra_ && reg_);
  }
  static std::unique_ptr<grpc::Server> Serve(const std::string& path, grpc::Service* service) {
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
    b.RegisterService(service);
    return b.BuildAndStart();
  }
  std::string dra() const { return dir_.path() + "/plugins/gpu.nvidia.com/dra.sock"; }
  std::string reg() const { return dir_.path() + "/registry/gpu.nvidia.com-reg.sock"; }

  ::nvdra::testing::TempDir dir_{kubelet::testing::kShortTempPrefix};
  ::k8s::io::kubelet::pkg::apis::dra::v1::DRAPlugin::Service dra_service_;
  ::pluginregistration::Registration::Service reg_service_;
  std::unique_ptr<grpc::Server> dra_, reg_;
};

TEST_F(NvdractlWrongSocketHintTest, RegisterOnTheDraSocketPointsAtTheRegistrationSocket) {
  CtlRun r = Nvdractl("register --socket " + dra());
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("UNIMPLEMENTED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hint: " + dra() + " does not serve pluginregistration.Registration"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("-reg.sock"), std::string::npos) << r.out;
}

TEST_F(NvdractlWrongSocketHintTest, PrepareOnTheRegistrationSocketPointsAtTheDraSocket) {
  CtlRun r = Nvdractl("prepare --socket " + reg() + " default/a/" + kubelet::testing::Uid("1"));
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("hint: " + reg() + " is a registration socket"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"hint\""), std::string::npos) << r.out;  // also in the JSON answer
}

TEST_F(NvdractlHintTest, WatchHealthWithStreamingOffNamesTheFlag) {
  CtlRun r = Nvdractl("watch-health --timeout 5 --socket " + dra());
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--health-streaming"), std::string::npos) << r.out;
}

TEST_F(NvdractlHintTest, WorkingCallsGiveNoHint) {
  CtlRun r = Nvdractl("register --socket " + reg());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.find("hint"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace nvdra::ctl
