#include "computedomain/compute_domain_kind.h"

#include <gtest/gtest.h>

#include "util/test_temp_dir.h"

#include <map>

#include "computedomain/compute_domain_checkpoint_codec.h"
#include "computedomain/testdata/upstream_checkpoint.h"
#include "devices/backends/open_device_lib.h"
#include "driver/engine.h"
#include "ledger/legacy_checkpoint.h"
#include "util/file_util.h"

namespace nvdra::computedomain {
namespace {

class FakeDomains final : public ComputeDomainSource {
 public:
  Result<ComputeDomainInfo> Get(const std::string& uid) override {
    auto it = domains.find(uid);
    if (it == domains.end()) return NotFound("ComputeDomain not found: " + uid);
    return it->second;
  }
  std::map<std::string, ComputeDomainInfo> domains;
};

class ComputeDomainKindTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path();
    devices::DeviceLibOptions o;
    o.mock_hardware = "gb200x4";
    o.mock_root = dir_ + "/mock";
    auto lib = devices::OpenDeviceLib(o);
    ASSERT_TRUE(lib.ok()) << lib.status().ToString();
    lib_ = std::move(lib).value();
    auto inv = lib_->Discover();
    ASSERT_TRUE(inv.ok());
    ASSERT_FALSE(inv->clique_id.empty());
    cdi_ = std::make_unique<cdi::CdiSpecWriter>(dir_ + "/cdi", "k8s.compute-domain.nvidia.com");
    ComputeDomainKindOptions ko;
    ko.plugin_dir = dir_ + "/plugin";
    ko.clique_id = inv->clique_id;
    domains_.domains["cd-1"] = {"cd-1", "default", "my-domain", true, ""};
    kind_ = std::make_unique<ComputeDomainKind>(ko, ComputeDomainEdits(devices::ContainerSources::ForLib(*lib_)),
                                                domains_);
  }
  void TearDown() override {
    kind_.reset();
    lib_.reset();
  }
  driver::ClaimWork ChannelWork(const std::string& device, const std::string& mode = "Single",
                                const std::string& domain = "cd-1") {
    driver::ClaimWork w{"uid-1", "default", "c", {}, {}};
    w.results.push_back({"channel", kDriverName, "node-1", device, false, ""});
    ComputeDomainChannelConfig cc{domain, mode};
    w.groups.push_back({cc, {}, {w.results.back()}});
    return w;
  }

  ::nvdra::testing::TempDir tmp_{"nvdra-cd-kind"};
  std::string dir_;
  std::unique_ptr<devices::DeviceLib> lib_;
  std::unique_ptr<cdi::CdiSpecWriter> cdi_;
  FakeDomains domains_;
  std::unique_ptr<ComputeDomainKind> kind_;
};

TEST_F(ComputeDomainKindTest, DeviceTypes) {
  EXPECT_EQ(kind_->DeviceType("daemon-0"), "daemon");
  EXPECT_EQ(kind_->DeviceType("channel-0"), "channel");
  EXPECT_EQ(kind_->DeviceType("channel-2047"), "channel");
  EXPECT_EQ(kind_->DeviceType("channel-2048"), "");
  EXPECT_EQ(kind_->DeviceType("channel-01"), "");
  EXPECT_EQ(kind_->DeviceType("channel-"), "");
  EXPECT_EQ(kind_->DeviceType("gpu-0"), "");
}

TEST_F(ComputeDomainKindTest, ChannelsAreHeldPerId) {
  auto plan = kind_->Plan(ChannelWork("channel-7"));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->held, std::vector<std::string>{"channel 7"});
  auto all = kind_->Plan(ChannelWork("channel-0", "All"));
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->held.size(), 2048u);
}

TEST_F(ComputeDomainKindTest, ReadinessGatesChannelsWithARetryableError) {
  auto w = ChannelWork("channel-1");
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(kind_->MayWaitUntilReady(w, *plan)) << "the engine checks the ledger before this gate";
  EXPECT_TRUE(kind_->CheckReady(w, *plan).ok());
  domains_.domains["cd-1"].node_ready = false;
  domains_.domains["cd-1"].not_ready = "the daemon for node node-1 in ComputeDomainClique x/y is NotReady";
  // The gate waits up to the claim's deadline, then names what is missing.
  w.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(700);
  Status s = kind_->CheckReady(w, *plan);
  EXPECT_GE(std::chrono::steady_clock::now(), w.deadline - std::chrono::milliseconds(500));
  EXPECT_TRUE(s.retryable()) << s.ToString();
  EXPECT_NE(s.message().find("current node not ready in ComputeDomain default/my-domain: the daemon for node node-1 "
                             "in ComputeDomainClique x/y is NotReady"),
            std::string::npos)
      << s.message();
  domains_.domains["cd-1"].ns = "other";
  s = kind_->CheckReady(w, *plan);
  EXPECT_FALSE(s.retryable());
  EXPECT_NE(s.message().find("namespace is different"), std::string::npos);
  auto unknown = ChannelWork("channel-1", "Single", "cd-unknown");
  auto p2 = kind_->Plan(unknown);
  ASSERT_TRUE(p2.ok());
  s = kind_->CheckReady(unknown, *p2);
  EXPECT_NE(s.message().find("ComputeDomain not found: cd-unknown"), std::string::npos);
}

TEST_F(ComputeDomainKindTest, ChannelPrepareInjectsTheChannelNode) {
  auto w = ChannelWork("channel-3");
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok());
  auto p = kind_->Prepare(w, *plan);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto out = driver::BuildClaimOutput(*cdi_, w.uid, w.results, p->edits);
  ASSERT_EQ(out.devices.size(), 1u);
  EXPECT_EQ(out.devices[0].cdi_device_ids,
            std::vector<std::string>{"k8s.compute-domain.nvidia.com/claim=uid-1-channel-3"});
  std::string json = cdi::RenderJson(out.spec);
  EXPECT_NE(json.find("/dev/nvidia-caps-imex-channels/channel3"), std::string::npos);
  EXPECT_EQ(json.find("/dev/nvidia-caps-imex-channels/channel4"), std::string::npos);
}

// A repeated Prepare of a claim the Go driver prepared rebuilds its spec
// from the imported undo record: its channels' nodes and the daemon's mount.
TEST_F(ComputeDomainKindTest, ClaimsImportedFromTheGoDriverGetTheirEditsBack) {
  ComputeDomainCheckpointCodec codec;
  auto imported = ledger::ParseLegacyCheckpoint(testing::UpstreamCdCheckpoint(), &codec, "boot");
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  ASSERT_EQ(imported->entries.size(), 2u);
  auto channel = kind_->Edits(imported->entries[0].undo, {"channel-0"});
  ASSERT_TRUE(channel.ok()) << channel.status().ToString();
  ASSERT_EQ(channel->devices.size(), 1u);
  EXPECT_EQ(channel->devices[0].device, "channel-0");
  std::vector<std::string> nodes;
  for (const auto& n : channel->devices[0].edits.device_nodes) nodes.push_back(n.path);
  EXPECT_EQ(nodes.size(), 2048u) << "allocationMode All: every channel";
  EXPECT_EQ(nodes.front(), "/dev/nvidia-caps-imex-channels/channel0");
  auto daemon = kind_->Edits(imported->entries[1].undo, {"daemon-0"});
  ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
  ASSERT_EQ(daemon->devices.size(), 1u);
  EXPECT_EQ(daemon->devices[0].device, "daemon-0");
  ASSERT_FALSE(daemon->devices[0].edits.mounts.empty());
  EXPECT_EQ(daemon->devices[0].edits.mounts[0].container_path, "/imexd");
}

TEST_F(ComputeDomainKindTest, DaemonPrepareMountsTheDomainDirectoryAndUnprepareLeavesIt) {
  driver::ClaimWork w{"uid-d", "default", "d", {}, {}};
  w.results.push_back({"daemon", kDriverName, "node-1", "daemon-0", false, ""});
  w.groups.push_back({ComputeDomainDaemonConfig{"cd-1"},
                      {},
                      {{"daemon", kDriverName, "node-1", "daemon-0", false, ""}}});
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->held, std::vector<std::string>{"daemon-0"});
  EXPECT_FALSE(kind_->MayWaitUntilReady(w, *plan)) << "a daemon claim does not wait for readiness";
  auto p = kind_->Prepare(w, *plan);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  std::string json = cdi::RenderJson(driver::BuildClaimOutput(*cdi_, w.uid, w.results, p->edits).spec);
  EXPECT_NE(json.find("/imexd"), std::string::npos);
  EXPECT_NE(json.find("COMPUTE_DOMAIN_UUID=cd-1"), std::string::npos);
  EXPECT_NE(json.find("COMPUTE_DOMAIN_NAME=my-domain"), std::string::npos);
  EXPECT_TRUE(PathExists(dir_ + "/plugin/domains/cd-1"));
  // The spec rebuilt from the undo record is byte-identical.
  auto again = kind_->Edits(p->undo, {"daemon-0"});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(cdi::RenderJson(driver::BuildClaimOutput(*cdi_, w.uid, w.results, *again).spec), json);
  ASSERT_TRUE(kind_->Unprepare("uid-d", p->undo).ok());
  // The daemon of a live domain may come back; directories of deleted
  // domains are the maintenance pass's (DomainDirectories::RemoveGone).
  EXPECT_TRUE(PathExists(dir_ + "/plugin/domains/cd-1"));
}

TEST_F(ComputeDomainKindTest, WithoutACliqueDaemonsStillGetTheirDirectoryAndEnvButChannelsNoNode) {
  kind_->SetCliqueId("");
  driver::ClaimWork w{"uid-d", "default", "d", {}, {}};
  w.results.push_back({"daemon", kDriverName, "node-1", "daemon-0", false, ""});
  w.groups.push_back({ComputeDomainDaemonConfig{"cd-1"},
                      {},
                      {{"daemon", kDriverName, "node-1", "daemon-0", false, ""}}});
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok());
  auto p = kind_->Prepare(w, *plan);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  std::string json = cdi::RenderJson(driver::BuildClaimOutput(*cdi_, w.uid, w.results, p->edits).spec);
  EXPECT_NE(json.find("/imexd"), std::string::npos);
  EXPECT_NE(json.find("\"CLIQUE_ID=\""), std::string::npos) << json;
  EXPECT_NE(json.find("COMPUTE_DOMAIN_UUID=cd-1"), std::string::npos);
  EXPECT_EQ(json.find("nvidia-cap"), std::string::npos);
  auto ch = ChannelWork("channel-0");
  auto cplan = kind_->Plan(ch);
  ASSERT_TRUE(cplan.ok());
  auto cp = kind_->Prepare(ch, *cplan);
  ASSERT_TRUE(cp.ok());
  EXPECT_TRUE(cp->edits.devices.empty());
}

TEST_F(ComputeDomainKindTest, DaemonClaimGetsTheBaseDeviceNextToItsOwn) {
  ComputeDomainKindOptions ko;
  ko.plugin_dir = dir_ + "/plugin";
  ko.clique_id = "c.1";
  ko.base_device_id = "k8s.compute-domain.nvidia.com/device=all";
  ComputeDomainKind kind(ko, ComputeDomainEdits(devices::ContainerSources::ForLib(*lib_)), domains_);
  driver::ClaimWork w{"uid-b", "default", "d", {}, {}};
  w.results.push_back({"daemon", kDriverName, "node-1", "daemon-0", false, ""});
  w.groups.push_back({ComputeDomainDaemonConfig{"cd-1"},
                      {},
                      {{"daemon", kDriverName, "node-1", "daemon-0", false, ""}}});
  auto plan = kind.Plan(w);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto p = kind.Prepare(w, *plan);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto out = driver::BuildClaimOutput(*cdi_, w.uid, w.results, p->edits);
  ASSERT_EQ(out.devices.size(), 1u);
  EXPECT_EQ(out.devices[0].cdi_device_ids,
            (std::vector<std::string>{"k8s.compute-domain.nvidia.com/claim=uid-b-daemon-0",
                                      "k8s.compute-domain.nvidia.com/device=all"}));
  // The same from the undo record (a repeated Prepare).
  auto again = kind.Edits(p->undo, {"daemon-0"});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(driver::BuildClaimOutput(*cdi_, w.uid, w.results, *again).devices[0].cdi_device_ids,
            out.devices[0].cdi_device_ids);
  // Channels never get it.
  auto cw = ChannelWork("channel-2");
  auto cplan = kind.Plan(cw);
  ASSERT_TRUE(cplan.ok());
  auto cp = kind.Prepare(cw, *cplan);
  ASSERT_TRUE(cp.ok()) << cp.status().ToString();
  EXPECT_EQ(driver::BuildClaimOutput(*cdi_, cw.uid, cw.results, cp->edits).devices[0].cdi_device_ids.size(), 1u);
}

TEST_F(ComputeDomainKindTest, DaemonClaimsMayLiveOutsideTheDomainsNamespace) {
  // The controller creates the daemon's claim template in the driver's
  // namespace, not in the ComputeDomain's.
  driver::ClaimWork w{"uid-d", "nvidia-dra-driver", "d", {}, {}};
  w.results.push_back({"daemon", kDriverName, "node-1", "daemon-0", false, ""});
  w.groups.push_back({ComputeDomainDaemonConfig{"cd-1"},
                      {},
                      {{"daemon", kDriverName, "node-1", "daemon-0", false, ""}}});
  domains_.domains["cd-1"].node_ready = false;  // the daemon is what makes the node ready
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  Status s = kind_->CheckReady(w, *plan);
  EXPECT_TRUE(s.ok()) << s.ToString();
  // A channel claim in that namespace is still refused.
  auto ch = ChannelWork("channel-0");
  ch.ns = "nvidia-dra-driver";
  auto cplan = kind_->Plan(ch);
  ASSERT_TRUE(cplan.ok());
  s = kind_->CheckReady(ch, *cplan);
  EXPECT_NE(s.message().find("namespace is different"), std::string::npos) << s.ToString();
}

TEST_F(ComputeDomainKindTest, UnprepareSkipsUndoFieldsOfAnUnexpectedType) {
  ASSERT_TRUE(MakeDirectories(dir_ + "/plugin/domains/cd-1", 0755).ok());
  for (auto undo : {nlohmann::json{{"daemon", "yes"}, {"domainID", "cd-1"}},
                    nlohmann::json{{"daemon", true}, {"domainID", 7}}, nlohmann::json{{"daemon", 1}}}) {
    Status s;
    EXPECT_NO_THROW(s = kind_->Unprepare("uid-d", undo)) << undo.dump();
    EXPECT_TRUE(s.ok()) << undo.dump() << ": " << s.ToString();
  }
  EXPECT_TRUE(PathExists(dir_ + "/plugin/domains/cd-1"));
}

TEST_F(ComputeDomainKindTest, ClaimsWithoutAConfigOrWithABadDomainAreRefused) {
  driver::ClaimWork w{"uid-1", "default", "c", {}, {}};
  w.results.push_back({"channel", kDriverName, "node-1", "channel-0", false, ""});
  EXPECT_FALSE(kind_->Plan(w).ok());
  EXPECT_FALSE(kind_->Plan(ChannelWork("channel-0", "Single", "../etc")).ok());
}

// Host-managed IMEX: the channel claim gets the channel it was allocated
// (allocationMode All is not looked at), waits for no domain daemon, is
// ready when the host daemon says so, and a daemon claim is refused for
// good with upstream's words; the daemon device is not published.
TEST_F(ComputeDomainKindTest, HostManagedImexServesChannelsFromTheHostDaemonAndRefusesDaemonClaims) {
  Status host = Unavailable("host nvidia-imex daemon not ready: UNAVAILABLE");
  ComputeDomainKindOptions ko;
  ko.plugin_dir = dir_ + "/plugin";
  ko.clique_id = lib_->Discover().value().clique_id;
  ko.host_managed_imex = true;
  ko.host_imex_ready = [&host] { return host; };
  ComputeDomainKind hm(ko, ComputeDomainEdits(devices::ContainerSources::ForLib(*lib_)), domains_);
  domains_.domains["cd-1"].node_ready = false;  // no domain daemon runs here

  for (const auto& d : hm.PublishedDevices()) EXPECT_NE(d.name, "daemon-0");
  ASSERT_FALSE(hm.PublishedDevices().empty());

  auto w = ChannelWork("channel-0", "All");
  auto plan = hm.Plan(w);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->held, std::vector<std::string>{"channel 0"}) << "allocationMode All is not host-managed IMEX's";
  Status s = hm.CheckReady(w, *plan);
  EXPECT_TRUE(s.retryable()) << s.ToString();
  EXPECT_EQ(s.message(), "host nvidia-imex daemon readiness check failed: host nvidia-imex daemon not ready: "
                         "UNAVAILABLE");
  host = Status::Ok();
  ASSERT_TRUE(hm.CheckReady(w, *plan).ok()) << "ready without the domain's own daemon";
  auto p = hm.Prepare(w, *plan);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  std::string json = cdi::RenderJson(driver::BuildClaimOutput(*cdi_, w.uid, w.results, p->edits).spec);
  EXPECT_NE(json.find("/dev/nvidia-caps-imex-channels/channel0"), std::string::npos);
  EXPECT_EQ(json.find("/dev/nvidia-caps-imex-channels/channel1\""), std::string::npos);
  // The domain's namespace is still checked.
  domains_.domains["cd-1"].ns = "other";
  EXPECT_NE(hm.CheckReady(w, *plan).message().find("namespace is different"), std::string::npos);

  driver::ClaimWork d{"uid-d", "default", "d", {}, {}};
  d.results.push_back({"daemon", kDriverName, "node-1", "daemon-0", false, ""});
  d.groups.push_back({ComputeDomainDaemonConfig{"cd-1"}, {}, {d.results.back()}});
  auto refused = hm.Plan(d);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().permanent());
  EXPECT_EQ(refused.status().message(), "ComputeDomain daemon claims are not supported when imex.mode=hostManaged");
}

// Upstream's imex.mode / imex.isolation rules, with its words.
TEST(ImexConfigTest, UpstreamsRulesAndWords) {
  ImexConfig c;
  EXPECT_TRUE(ValidateImexConfig(c, false).ok());
  c.mode = "hostManaged";
  EXPECT_EQ(ValidateImexConfig(c, false).message(),
            "imex.mode=\"hostManaged\" requires the HostManagedIMEXDaemon feature gate to be enabled");
  EXPECT_TRUE(ValidateImexConfig(c, true).ok());
  c.isolation = "channel";
  EXPECT_EQ(ValidateImexConfig(c, true).message(),
            "imex.isolation=\"channel\" is not supported yet: per-workload IMEX channel allocation is not "
            "implemented");
  c.isolation = "pod";
  EXPECT_EQ(ValidateImexConfig(c, true).message(), "unknown imex.isolation \"pod\": must be \"domain\" or \"channel\"");
  c = ImexConfig{};
  c.mode = "both";
  EXPECT_EQ(ValidateImexConfig(c, true).message(), "unknown imex.mode \"both\"");
}

// The host daemon's readiness: nvidia-imex-ctl found in the driver root and
// run with the socket under that root; READY alone is ready.
TEST(HostImexProbeTest, RunsTheDriverRootsToolAgainstTheSocketUnderTheRoot) {
  ::nvdra::testing::TempDir root{"nvdra-imex-root"};
  std::vector<std::vector<std::string>> ran;
  std::string answer = "READY\n";
  HostImexProbe probe(root.path(), "/etc/nvidia-imex/imex_ctrl.sock", [&](const std::vector<std::string>& argv) {
    ran.push_back(argv);
    return Result<std::string>(answer);
  });
  Status missing = probe.CheckReady();
  EXPECT_TRUE(missing.retryable());
  EXPECT_NE(missing.message().find("nvidia-imex-ctl not found under driver root"), std::string::npos);
  EXPECT_TRUE(ran.empty());
  ASSERT_TRUE(MakeDirectories(root.path() + "/usr/sbin").ok());
  ASSERT_TRUE(WriteFileAtomically(root.path() + "/usr/sbin/nvidia-imex-ctl", "#!/bin/sh\n", 0755).ok());
  EXPECT_TRUE(probe.CheckReady().ok());
  ASSERT_EQ(ran.size(), 1u);
  EXPECT_EQ(ran[0], (std::vector<std::string>{root.path() + "/usr/sbin/nvidia-imex-ctl", "-q",
                                              "--u=" + root.path() + "/etc/nvidia-imex/imex_ctrl.sock"}));
  for (const std::string& no : {"NOT READY\n", "UNAVAILABLE\n", "READYING\n", ""}) {
    answer = no;
    Status s = probe.CheckReady();
    EXPECT_FALSE(s.ok()) << no;
    EXPECT_NE(s.message().find("host nvidia-imex daemon not ready"), std::string::npos) << s.message();
  }
  answer = "IMEX daemon status: READY\n";
  EXPECT_TRUE(probe.CheckReady().ok());
}

}  // namespace
}  // namespace nvdra::computedomain
