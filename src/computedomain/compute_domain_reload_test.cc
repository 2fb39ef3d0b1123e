// The ComputeDomain kind across a reload of the NVIDIA driver, through the
// pieces the GPU plugin uses (ReloadableKind around the kind, the engine's
// RewriteClaimSpecs), on the mock GB200 node whose driver is swapped: while
// the driver is gone channel and daemon claims are refused with a retryable
// error and Unprepare goes on from the ledger; on the new driver the
// channels' major is read again from /proc/devices, and the specs of the
// claims prepared before name it, under the same CDI ids.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "computedomain/compute_domain_checkpoint_codec.h"
#include "computedomain/compute_domain_config_kinds.h"
#include "computedomain/compute_domain_kind.h"
#include "devices/backends/open_device_lib.h"
#include "devices/mock/mock_device_lib.h"
#include "driver/engine.h"
#include "driver/engine_test_util.h"
#include "driver/reloadable_kind.h"
#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::computedomain {
namespace {

using driver::testing::kFar;

class ReadyDomains final : public ComputeDomainSource {
 public:
  Result<ComputeDomainInfo> Get(const std::string& uid) override {
    return ComputeDomainInfo{uid, "default", "my-domain", true, ""};
  }
};

const char* const kGone = "the NVIDIA driver is reloading (driver 570.158.01 went away: test); retry once it is back";

class ComputeDomainReloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The claims' opaque configs are decoded as the plugin decodes them.
    ASSERT_TRUE(RegisterComputeDomainConfigKinds().ok());
    dir_ = tmp_.path();
    root_ = dir_ + "/mock";
    devices::DeviceLibOptions o;
    o.mock_hardware = "gb200x4";
    o.mock_root = root_;
    auto lib = devices::OpenDeviceLib(o);
    ASSERT_TRUE(lib.ok()) << lib.status().ToString();
    lib_ = std::move(lib).value();
    auto inv = lib_->Discover();
    ASSERT_TRUE(inv.ok()) << inv.status().ToString();
    clique_ = inv->clique_id;
    auto profile = devices::LoadMockProfile("gb200x4");
    ASSERT_TRUE(profile.ok());
    profile_ = *profile;
    cdi_ = std::make_unique<cdi::CdiSpecWriter>(dir_ + "/cdi", std::string("k8s.") + kDriverName, "claim");
    ASSERT_TRUE(cdi_->EnsureRoot().ok());
    auto ledger = driver::testing::OpenTestLedger(dir_, &codec_);
    ASSERT_TRUE(ledger.ok()) << ledger.status().ToString();
    ledger_ = std::move(ledger).value();
    kind_ = std::make_unique<driver::ReloadableKind>(NewKind(), codec_);
    engine_ = std::make_unique<driver::Engine>(driver::EngineOptions{}, *ledger_, *kind_, claims_, *cdi_, nullptr);
  }
  void TearDown() override {
    engine_.reset();
    kind_.reset();
    ledger_.reset();
  }
  // A kind as the plugin builds one on the driver there now.
  std::unique_ptr<driver::DeviceKind> NewKind() {
    ComputeDomainKindOptions ko;
    ko.plugin_dir = dir_ + "/plugin";
    ko.clique_id = clique_;
    return std::make_unique<ComputeDomainKind>(ko, ComputeDomainEdits(devices::ContainerSources::ForLib(*lib_)),
                                               domains_);
  }
  model::ClaimRef Put(const std::string& uid, const std::string& device) {
    const bool daemon = device == kDaemonDeviceName;
    driver::ClaimSnapshot c;
    c.uid = uid;
    c.ns = "default";
    c.name = "c-" + uid;
    c.allocated = true;
    const std::string request = daemon ? "daemon" : "channel";
    c.results = {{request, kDriverName, "node-1", device, false, ""}};
    c.configs = {{config::ConfigSource::kFromClaim,
                  "",
                  {request},
                  kDriverName,
                  std::string(R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":")") +
                      (daemon ? "ComputeDomainDaemonConfig" : "ComputeDomainChannelConfig") +
                      R"(","domainID":"cd-1"})"}};
    c.consumers = {"pod-" + uid};
    claims_.Put(c);
    return {c.ns, c.uid, c.name};
  }
  std::string Spec(const std::string& uid) {
    auto path = cdi_->ClaimSpecPath(uid);
    auto text = path.ok() ? ReadFileToString(*path) : Result<std::string>(path.status());
    return text.ok() ? *text : "";
  }
  // The channel node's device number under the mock's dev root (0 when it
  // is a regular file: a mock root of a process that may not mknod).
  unsigned ChannelMajor(int id) {
    struct stat st;
    const std::string path = root_ + "/dev/nvidia-caps-imex-channels/channel" + std::to_string(id);
    if (::stat(path.c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) return 0;
    return major(st.st_rdev);
  }

  ::nvdra::testing::TempDir tmp_{"nvdra-cd-reload"};
  std::string dir_, root_, clique_;
  devices::MockProfile profile_;
  std::unique_ptr<devices::DeviceLib> lib_;
  ComputeDomainCheckpointCodec codec_;
  std::unique_ptr<cdi::CdiSpecWriter> cdi_;
  std::unique_ptr<ledger::ClaimLedger> ledger_;
  driver::testing::FakeClaimSource claims_;
  ReadyDomains domains_;
  std::unique_ptr<driver::ReloadableKind> kind_;
  std::unique_ptr<driver::Engine> engine_;
};

TEST_F(ComputeDomainReloadTest, ChannelsFollowTheDriverAcrossAReload) {
  const std::string old_major = "\"major\": " + std::to_string(devices::kMockImexChannelsMajor);
  auto a = Put("uid-a", "channel-0");
  auto d = Put("uid-d", kDaemonDeviceName);
  auto prepared = engine_->PrepareClaim(a, kFar);
  ASSERT_EQ(prepared.status().message(), "");
  ASSERT_EQ(engine_->PrepareClaim(d, kFar).status().message(), "");
  EXPECT_NE(Spec("uid-a").find(old_major), std::string::npos) << Spec("uid-a");

  // Gone: the devices tainted, new claims refused with a retryable error
  // that says why, Unprepare from the ledger.
  ASSERT_TRUE(devices::SwapMockDriver(root_, devices::MockLayout::kPlain, profile_, devices::kMockDriverGone).ok());
  kind_->SetGone(kGone);
  auto published = kind_->PublishedDevices();
  ASSERT_FALSE(published.empty());
  for (const auto& dev : published) {
    ASSERT_EQ(dev.taints.size(), 1u) << dev.name;
    EXPECT_EQ(dev.taints[0].key, "compute-domain.nvidia.com/driver-reloading");
  }
  auto b = Put("uid-b", "channel-1");
  ASSERT_TRUE(engine_->UnprepareClaim(d, kFar).ok());
  EXPECT_EQ(Spec("uid-d"), "");
  auto d2 = Put("uid-d2", kDaemonDeviceName);
  for (const auto& ref : {b, d2}) {
    Status s = engine_->PrepareClaim(ref, kFar).status();
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << ref.uid << ": " << s.ToString();
    EXPECT_TRUE(s.retryable()) << ref.uid;
    EXPECT_NE(s.message().find("driver is reloading"), std::string::npos) << s.message();
    EXPECT_EQ(Spec(ref.uid), "");
  }

  // Back on another driver whose module gave the channels another major.
  ASSERT_TRUE(devices::SwapMockDriver(root_, devices::MockLayout::kPlain, profile_, "580.65.06", 241).ok());
  kind_->Replace(NewKind());
  int errors = 0;
  EXPECT_EQ(engine_->RewriteClaimSpecs(&errors), 1);
  EXPECT_EQ(errors, 0);
  const std::string spec = Spec("uid-a");
  EXPECT_NE(spec.find("\"major\": 241"), std::string::npos) << spec;
  EXPECT_EQ(spec.find(old_major), std::string::npos) << spec;
  EXPECT_NE(spec.find("\"name\": \"uid-a-channel-0\""), std::string::npos) << spec;
  if (::geteuid() == 0) EXPECT_EQ(ChannelMajor(0), 241u) << "the stale node is replaced";
  EXPECT_TRUE(kind_->PublishedDevices()[0].taints.empty());
  // The kubelet's retries: the claims refused in the gap are prepared on the
  // new major, the one prepared before keeps its CDI ids.
  ASSERT_EQ(engine_->PrepareClaim(b, kFar).status().message(), "");
  EXPECT_NE(Spec("uid-b").find("\"major\": 241"), std::string::npos) << Spec("uid-b");
  ASSERT_EQ(engine_->PrepareClaim(d2, kFar).status().message(), "");
  auto again = engine_->PrepareClaim(a, kFar);
  ASSERT_EQ(again.status().message(), "");
  EXPECT_EQ(again.value(), prepared.value());
  for (const auto& ref : {a, b, d2}) EXPECT_TRUE(engine_->UnprepareClaim(ref, kFar).ok()) << ref.uid;
  EXPECT_EQ(Spec("uid-a"), "");
}

}  // namespace
}  // namespace nvdra::computedomain
