#include "gpu/mps_strategy.h"

#include <gtest/gtest.h>

#include "devices/backends/open_device_lib.h"
#include "gpu/gpu_checkpoint_codec.h"
#include "gpu/gpu_kind.h"
#include "gpu/gpu_test_util.h"
#include "gpu/mps_config.h"
#include "gpu/time_slicing_config.h"
#include "util/file_util.h"
#include "util/mutex.h"
#include "util/test_paths.h"
#include "util/test_temp_dir.h"

namespace nvdra::gpu {
namespace {

using nlohmann::json;

// The Kubernetes side of MPS daemons, in memory: what was created and
// deleted, in call order, and how many readiness checks fail first.
class FakeDaemonApi final : public MpsDaemonApi {
 public:
  Status Create(const json& d) override {
    calls.push_back("create " + d["metadata"]["name"].get<std::string>());
    std::string name = d["metadata"]["name"];
    if (objects.count(name)) return AlreadyExists("deployments.apps \"" + name + "\" already exists");
    objects[name] = d;
    return Status::Ok();
  }
  Status CheckReady(const std::string& ns, const std::string& name, kube::Deadline) override {
    ++checks;
    if (!objects.count(name)) return NotFound("deployments.apps \"" + name + "\" not found");
    if (not_ready_checks > 0) {
      --not_ready_checks;
      return Unavailable("control daemon not yet ready");
    }
    return Status::Ok();
  }
  Status Delete(const std::string& ns, const std::string& name) override {
    calls.push_back("delete " + name);
    if (!fail_delete.ok()) return fail_delete;
    objects.erase(name);
    return Status::Ok();
  }
  Result<std::vector<std::string>> ListForNode(const std::string& ns, const std::string& node) override {
    calls.push_back("list " + ns + " " + node);
    std::vector<std::string> out;
    for (const auto& [name, d] : objects) out.push_back(name);
    return out;
  }

  std::map<std::string, json> objects;
  std::vector<std::string> calls;
  int checks = 0;
  int not_ready_checks = 0;  // < 0: never ready
  Status fail_delete;
};

class FakeMounter final : public ShmMounter {
 public:
  Status MountTmpfs(const std::string& path, const std::string& size) override {
    if (!PathExists(path)) return NotFound("mount point " + path + " does not exist");
    mounted.insert(path);
    sizes.push_back(size);
    return Status::Ok();
  }
  Status Unmount(const std::string& path) override {
    mounted.erase(path);
    return Status::Ok();
  }
  std::set<std::string> mounted;
  std::vector<std::string> sizes;
};

class MpsStrategyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path();
    Status opened = testing::OpenMockNode("h100x8", dir_, lib_, inventory_);
    ASSERT_TRUE(opened.ok()) << opened.ToString();
    NewKind();
  }
  void NewKind(bool consumable_shares = false) {
    kind_.reset();
    api_ = std::make_shared<FakeDaemonApi>();
    mounter_ = std::make_shared<FakeMounter>();
    GpuKindOptions o;
    o.resets.state_path = dir_ + "/time-slice-resets.json";
    o.mps.settings.plugin_dir = dir_ + "/plugin";
    o.mps.settings.template_path = std::string(NVDRA_SOURCE_DIR) + "/templates/mps-control-daemon.tmpl.yaml";
    o.mps.settings.node_name = "node-1";
    o.mps.settings.ns = "nvdra";
    o.mps.settings.image = "nvdra:test";
    o.mps.settings.shm_size = "1024k";
    o.mps.api = api_;
    o.mps.mounter = mounter_;
    o.mps.consumable_shares = consumable_shares;
    o.mps.first_poll = std::chrono::milliseconds(1);
    o.mps.max_poll = std::chrono::milliseconds(2);
    kind_ = std::make_unique<GpuKind>(inventory_, GpuContainerEdits(devices::ContainerSources::ForLib(*lib_)),
                                      lib_->control(), std::move(o));
  }
  driver::ClaimWork Work(const std::vector<std::string>& devices, MpsConfig mps = {}) {
    driver::ClaimWork w;
    w.uid = "uid-1";
    w.ns = "default";
    w.name = "c";
    GpuConfig gc;
    gc.sharing = GpuSharing{"MPS", std::nullopt, mps};
    config::ConfigGroup g{gc, {}, {}};
    for (const auto& d : devices) {
      model::AllocationResult r{"req", kDriverName, "node-1", d, false, ""};
      w.results.push_back(r);
      g.results.push_back(r);
    }
    w.groups.push_back(g);
    return w;
  }
  std::string Uuid(int minor) { return inventory_.gpus[minor].uuid; }
  std::string ControlLog() {
    auto log = ReadFileToString(dir_ + "/mock/state/control.log");
    return log.ok() ? *log : "";
  }

  ::nvdra::testing::TempDir tmp_{"nvdra-mps"};
  std::string dir_;
  std::unique_ptr<devices::DeviceLib> lib_;
  devices::NodeInventory inventory_;
  std::shared_ptr<FakeDaemonApi> api_;
  std::shared_ptr<FakeMounter> mounter_;
  std::unique_ptr<GpuKind> kind_;
};

TEST(MpsDaemonIdTest, IsTheClaimUidAndFiveHexDigitsOfTheUuidsHash) {
  // sha256("GPU-a,GPU-b") starts with 95a93.
  EXPECT_EQ(MpsDaemonId("uid-1", {"GPU-a", "GPU-b"}), "uid-1-95a93");
}

TEST(MpsDaemonIdTest, ShmSizeIsHalfOfMemTotalOrUpstreamsFallback) {
  EXPECT_EQ(ShmSizeFromMeminfo("MemFree: 1 kB\nMemTotal:       32768000 kB\n"), "16384000k");
  EXPECT_EQ(ShmSizeFromMeminfo("nothing here\n"), "65536k");
}

TEST_F(MpsStrategyTest, PlanRecordsTheWholeDaemonBeforeAnythingExists) {
  MpsConfig mps;
  mps.default_active_thread_percentage = 50;
  mps.default_pinned_device_memory_limit = *config::Quantity::Parse("10Gi");
  mps.default_per_device_pinned_memory_limit["1"] = *config::Quantity::Parse("2Gi");
  auto plan = kind_->Plan(Work({"gpu-3", "gpu-1"}, mps));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto undo = DecodeGpuUndo(plan->undo);
  ASSERT_TRUE(undo.ok());
  ASSERT_EQ(undo->Of<MpsUndo>().daemons.size(), 1u);
  const MpsDaemonUndo& d = undo->Of<MpsUndo>().daemons[0];
  std::vector<std::string> uuids = {Uuid(1), Uuid(3)};
  std::sort(uuids.begin(), uuids.end());
  EXPECT_EQ(d.uuids, uuids);
  EXPECT_EQ(d.exclusive_process, uuids);
  EXPECT_EQ(d.id, MpsDaemonId("uid-1", uuids));
  EXPECT_EQ(d.deployment, "mps-control-daemon-" + d.id);
  EXPECT_EQ(d.ns, "nvdra");
  EXPECT_EQ(d.root, dir_ + "/plugin/mps/" + d.id);
  EXPECT_EQ(d.active_thread_percentage, 50);
  // Index 1 of the sorted UUIDs gets its own limit, the other the default.
  EXPECT_EQ(d.pinned_limits, (std::map<std::string, std::string>{{uuids[0], "10240M"}, {uuids[1], "2048M"}}));
  // Nothing exists yet.
  EXPECT_TRUE(api_->calls.empty());
  EXPECT_TRUE(mounter_->mounted.empty());
  EXPECT_FALSE(PathExists(d.root));
  EXPECT_EQ(ControlLog(), "");
  // The record survives its encoding.
  EXPECT_EQ(*DecodeGpuUndo(EncodeGpuUndo(*undo)), *undo);
}

TEST_F(MpsStrategyTest, PrepareStartsTheDaemonWaitsForItAndGivesEveryDeviceThePipeAndShm) {
  auto w = Work({"gpu-0", "gpu-1"});
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok());
  auto prepared = kind_->Prepare(w, *plan);
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  EXPECT_TRUE(prepared->await_ready);
  const MpsDaemonUndo d = DecodeGpuUndo(prepared->undo)->Of<MpsUndo>().daemons.at(0);
  for (const char* sub : {"/shm", "/pipe", "/log"}) EXPECT_TRUE(PathExists(d.root + sub)) << sub;
  EXPECT_EQ(mounter_->mounted, std::set<std::string>{d.root + "/shm"});
  EXPECT_EQ(mounter_->sizes, std::vector<std::string>{"1024k"});
  EXPECT_EQ(ControlLog(), "SetComputeMode " + d.uuids[0] + " EXCLUSIVE_PROCESS\nSetComputeMode " + d.uuids[1] +
                              " EXCLUSIVE_PROCESS\n");
  ASSERT_EQ(api_->objects.count(d.deployment), 1u);
  const json& dep = api_->objects[d.deployment];
  EXPECT_EQ(dep["metadata"]["labels"][kMpsNodeLabel], "node-1");
  EXPECT_EQ(dep["metadata"]["labels"][kMpsClaimLabel], "uid-1");
  EXPECT_EQ(dep["spec"]["template"]["spec"]["nodeName"], "node-1");
  ASSERT_EQ(prepared->edits.devices.size(), 2u);
  for (const auto& dev : prepared->edits.devices) {
    const auto& env = dev.edits.env;
    EXPECT_NE(std::find(env.begin(), env.end(), "CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps"), env.end()) << dev.device;
    bool shm = false, pipe = false;
    for (const auto& m : dev.edits.mounts) {
      shm |= m.container_path == "/dev/shm" && m.host_path == d.root + "/shm";
      pipe |= m.container_path == "/tmp/nvidia-mps" && m.host_path == d.root + "/pipe";
    }
    EXPECT_TRUE(shm && pipe) << dev.device;
  }
  // The edits rebuilt from the record (a repeated Prepare) are the same.
  auto rebuilt = kind_->Edits(prepared->undo, {});
  ASSERT_TRUE(rebuilt.ok());
  EXPECT_EQ(rebuilt->devices.size(), prepared->edits.devices.size());
  EXPECT_EQ(rebuilt->devices[0].edits, prepared->edits.devices[0].edits);
  // Not ready twice, then ready.
  api_->not_ready_checks = 2;
  w.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  EXPECT_TRUE(kind_->AwaitReady(w, prepared->undo).ok());
  EXPECT_EQ(api_->checks, 3);
  // Prepare again (a retry, a reboot): each step once more, nothing new.
  auto again = kind_->Prepare(w, *plan);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(api_->objects.size(), 1u);
}

TEST_F(MpsStrategyTest, ADaemonThatStaysUnreadyFailsTheWaitRetryablyNamingItsDeployment) {
  auto w = Work({"gpu-2"});
  auto plan = kind_->Plan(w);
  auto prepared = kind_->Prepare(w, *plan);
  ASSERT_TRUE(prepared.ok());
  api_->not_ready_checks = 1 << 30;
  w.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(600);
  Status s = kind_->AwaitReady(w, prepared->undo);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_FALSE(s.permanent());
  const std::string name = DecodeGpuUndo(prepared->undo)->Of<MpsUndo>().daemons.at(0).deployment;
  EXPECT_EQ(s.message(),
            "MPS control daemon is not yet ready: Deployment nvdra/" + name + ": control daemon not yet ready");
}

TEST_F(MpsStrategyTest, UnprepareDeletesTheDaemonFirstThenResetsUnmountsAndRemovesFromTheRecordAlone) {
  auto w = Work({"gpu-4"});
  auto plan = kind_->Plan(w);
  auto prepared = kind_->Prepare(w, *plan);
  ASSERT_TRUE(prepared.ok());
  const MpsDaemonUndo d = DecodeGpuUndo(prepared->undo)->Of<MpsUndo>().daemons.at(0);
  // A failing delete leaves everything for the retry: the daemon still uses
  // the GPU.
  api_->fail_delete = Unavailable("the API server is down");
  Status s = kind_->Unprepare("uid-1", prepared->undo);
  EXPECT_NE(s.message().find("failed to delete deployment " + d.deployment), std::string::npos) << s.message();
  EXPECT_TRUE(PathExists(d.root));
  EXPECT_EQ(mounter_->mounted.size(), 1u);
  // A kind built anew (a restart) undoes it from the record alone.
  auto kept = api_;
  NewKind();
  api_->objects = kept->objects;
  ASSERT_TRUE(kind_->Unprepare("uid-1", prepared->undo).ok());
  EXPECT_TRUE(api_->objects.empty());
  EXPECT_FALSE(PathExists(d.root));
  EXPECT_NE(ControlLog().find("SetComputeMode " + Uuid(4) + " DEFAULT\n"), std::string::npos) << ControlLog();
  // Again (the kubelet's retry after a lost answer): nothing left to do, OK.
  EXPECT_TRUE(kind_->Unprepare("uid-1", prepared->undo).ok());
}

TEST_F(MpsStrategyTest, RefusalsUseUpstreamsWords) {
  NewKind(/*consumable_shares=*/true);
  EXPECT_EQ(kind_->Plan(Work({"gpu-0"})).status().message(),
            "MPS sharing is not supported when consumable shares is enabled");
  NewKind();
  MpsConfig bad_index;
  bad_index.default_per_device_pinned_memory_limit["5"] = *config::Quantity::Parse("1Gi");
  EXPECT_EQ(kind_->Plan(Work({"gpu-0"}, bad_index)).status().message(),
            "error starting MPS control daemon: error transforming DefaultPerDevicePinnedMemoryLimit into string: "
            "invalid device: invalid device index: 5");
  // Multi-user mode needs Volta or newer.
  inventory_.gpus[0].cuda_compute_capability = "6.1";
  NewKind();
  MpsConfig multi;
  multi.multi_user = true;
  EXPECT_EQ(kind_->Plan(Work({"gpu-0"}, multi)).status().message(),
            "error starting MPS control daemon: multiuser mode was requested but is not supported: " + Uuid(0) +
                " has insufficient cudaComputeCapability \"6.1\", wanted >= \"7.0\"");
  EXPECT_TRUE(kind_->Plan(Work({"gpu-1"}, multi)).ok());
}

TEST_F(MpsStrategyTest, TheSweepDeletesOnlyDaemonsAndDirectoriesNoRecordOwnsAskingTheLedgerAfterListing) {
  auto w = Work({"gpu-5"});
  auto plan = kind_->Plan(w);
  auto prepared = kind_->Prepare(w, *plan);
  ASSERT_TRUE(prepared.ok());
  api_->objects["mps-control-daemon-orphan"] = json::object();
  ASSERT_TRUE(MakeDirectories(dir_ + "/plugin/mps/orphan-id/shm").ok());
  std::vector<std::string> calls_when_asked;
  auto removed = kind_->SweepOrphans([&]() -> Result<std::vector<HeldRecord>> {
    calls_when_asked = api_->calls;
    return std::vector<HeldRecord>{prepared->undo, json{{"channel", 3}}, json()};
  });
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(*removed, 2);
  EXPECT_EQ(calls_when_asked.back(), "list nvdra node-1");
  const MpsDaemonUndo d = DecodeGpuUndo(prepared->undo)->Of<MpsUndo>().daemons.at(0);
  EXPECT_EQ(api_->objects.count(d.deployment), 1u);
  EXPECT_EQ(api_->objects.count("mps-control-daemon-orphan"), 0u);
  EXPECT_TRUE(PathExists(d.root));
  EXPECT_FALSE(PathExists(dir_ + "/plugin/mps/orphan-id"));
  // A record this version cannot read still owns the daemon it names.
  api_->objects["mps-control-daemon-newer"] = json::object();
  json newer = {{"mps", {{{"id", "newer"}, {"deployment", "mps-control-daemon-newer"}, {"root", 7}}}}};
  removed = kind_->SweepOrphans([&]() -> Result<std::vector<HeldRecord>> {
    return std::vector<HeldRecord>{prepared->undo, newer};
  });
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 0);
  EXPECT_EQ(api_->objects.count("mps-control-daemon-newer"), 1u);
}

// A claim the Go driver prepared with MPS, imported from its checkpoint: its
// daemon is stopped and its GPUs' compute mode reset at Unprepare, in this
// plugin's namespace and directory.
TEST_F(MpsStrategyTest, ADaemonTheGoDriverStartedIsStoppedAtUnprepare) {
  ledger::UpstreamClaim claim;
  ledger::UpstreamPreparedGroup g;
  g.config_state = {{"mpsControlDaemonID", "uid-1-abcde"}};
  ledger::UpstreamPreparedDevice d;
  d.type = "gpu";
  d.member = {{"info", {{"uuid", Uuid(6)}}}, {"device", {{"DeviceName", "gpu-6"}}}};
  d.device.device = "gpu-6";
  g.devices.push_back(d);
  claim.groups.push_back(g);
  ledger::ClaimEntry entry;
  entry.uid = "uid-1";
  const json undo = GpuCheckpointCodec().ImportUndo(entry, claim);
  const std::string root = dir_ + "/plugin/mps/uid-1-abcde";
  ASSERT_TRUE(MakeDirectories(root + "/shm").ok());
  api_->objects["mps-control-daemon-uid-1-abcde"] = json::object();
  ASSERT_TRUE(kind_->Unprepare("uid-1", undo).ok());
  EXPECT_EQ(api_->calls, std::vector<std::string>{"delete mps-control-daemon-uid-1-abcde"});
  EXPECT_FALSE(PathExists(root));
  EXPECT_EQ(ControlLog(), "SetComputeMode " + Uuid(6) + " DEFAULT\n");
  // Its rebuilt CDI edits carry the daemon's pipe and shm.
  auto edits = kind_->Edits(undo, {"gpu-6"});
  ASSERT_TRUE(edits.ok()) << edits.status().ToString();
  bool pipe = false;
  for (const auto& m : edits->devices.at(0).edits.mounts) pipe |= m.host_path == root + "/pipe";
  EXPECT_TRUE(pipe);
}

TEST(MpsDeploymentTest, TheShippedTemplateRendersUpstreamsDeployment) {
  auto text = ReadFileToString(std::string(NVDRA_SOURCE_DIR) + "/templates/mps-control-daemon.tmpl.yaml");
  ASSERT_TRUE(text.ok());
  MpsSettings s;
  s.template_path = "/templates/mps-control-daemon.tmpl.yaml";
  s.node_name = "node-1";
  s.image = "nvdra:1";
  s.image_pull_policy = "IfNotPresent";
  s.image_pull_secrets = {"a", "b"};
  s.service_account = "sa";
  s.host_driver_root = "/run/nvidia/driver";
  s.feature_gates = {{"MPSSupport", true}, {"DynamicMIG", false}};
  MpsDaemonUndo d;
  d.id = "uid-1-95a93";
  d.ns = "nvdra";
  d.deployment = "mps-control-daemon-uid-1-95a93";
  d.root = "/var/lib/kubelet/plugins/gpu.nvidia.com/mps/uid-1-95a93";
  d.uuids = {"GPU-a", "GPU-b"};
  d.active_thread_percentage = 25;
  d.pinned_limits = {{"GPU-a", "100M"}};
  d.multi_user = true;
  auto dep = RenderMpsDeployment(*text, s, d);
  ASSERT_TRUE(dep.ok()) << dep.status().ToString();
  const json& pod = (*dep)["spec"]["template"]["spec"];
  EXPECT_EQ((*dep)["spec"]["selector"]["matchLabels"]["app"], d.deployment);
  EXPECT_EQ(pod["serviceAccountName"], "sa");
  EXPECT_EQ(pod["hostPID"], true);
  EXPECT_EQ(pod["imagePullSecrets"], json::parse(R"([{"name":"a"},{"name":"b"}])"));
  const json& c = pod["containers"][0];
  EXPECT_EQ(c["image"], "nvdra:1");
  EXPECT_EQ(c["imagePullPolicy"], "IfNotPresent");
  EXPECT_EQ(c["env"][0], json::parse(R"({"name":"CUDA_VISIBLE_DEVICES","value":"GPU-a,GPU-b"})"));
  EXPECT_EQ(c["env"][1], json::parse(R"({"name":"FEATURE_GATES","value":"DynamicMIG=false,MPSSupport=true,"})"));
  const std::string script = c["args"][0];
  EXPECT_NE(script.find("$RUN \"nvidia-cuda-mps-control -d -M\""), std::string::npos) << script;
  EXPECT_NE(script.find("echo set_default_active_thread_percentage 25 | nvidia-cuda-mps-control"), std::string::npos);
  EXPECT_NE(script.find("echo set_default_device_pinned_mem_limit GPU-a 100M | nvidia-cuda-mps-control"),
            std::string::npos);
  EXPECT_EQ(pod["volumes"][0]["hostPath"]["path"], "/run/nvidia/driver");
  EXPECT_EQ(pod["volumes"][1]["hostPath"]["path"], d.root + "/shm");
  EXPECT_EQ(c["volumeMounts"][1]["mountPath"], "/dev/shm");
  // Without the optional settings their fields are absent.
  s.image_pull_policy = s.service_account = "";
  s.image_pull_secrets.clear();
  dep = RenderMpsDeployment(*text, s, d);
  ASSERT_TRUE(dep.ok());
  EXPECT_FALSE((*dep)["spec"]["template"]["spec"].contains("serviceAccountName"));
  EXPECT_FALSE((*dep)["spec"]["template"]["spec"].contains("imagePullSecrets"));
  EXPECT_FALSE((*dep)["spec"]["template"]["spec"]["containers"][0].contains("imagePullPolicy"));
  // A template of another shape is refused, never thrown on.
  for (const char* odd :
       {"kind: 5\napiVersion: apps/v1\n", "- a list\n", "apiVersion: apps/v1\nkind: Deployment\nmetadata: [1]\n"}) {
    EXPECT_EQ(RenderMpsDeployment(odd, s, d).status().code(), StatusCode::kInvalidArgument) << odd;
  }
  // A template that names another Deployment is refused.
  auto other = RenderMpsDeployment("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n  namespace: nvdra\n",
                                   s, d);
  EXPECT_EQ(other.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace nvdra::gpu
