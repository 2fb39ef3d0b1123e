#include "gpu/gpu_kind.h"

#include <set>

#include "gpu/full_gpu_type.h"
#include "gpu/gpu_handlers.h"
#include "gpu/static_mig_type.h"
#include "gpu/time_slicing_undo.h"

#include <gtest/gtest.h>

#include "util/test_temp_dir.h"

#include "devices/backends/open_device_lib.h"
#include "driver/engine.h"
#include "driver/engine_test_util.h"
#include "gpu/gpu_checkpoint_codec.h"
#include "gpu/mps_config.h"
#include "gpu/time_slicing_config.h"
#include "ledger/ledger_test_util.h"
#include "ledger/legacy_checkpoint.h"
#include "util/file_util.h"
#include "util/mutex.h"

namespace nvdra::gpu {
namespace {

class GpuKindTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = tmp_.path(); }
  void TearDown() override {
    kind_.reset();
    lib_.reset();
  }
  void Open(const std::string& profile) {
    devices::DeviceLibOptions o;
    o.mock_hardware = profile;
    o.mock_root = dir_ + "/mock";
    auto lib = devices::OpenDeviceLib(o);
    ASSERT_TRUE(lib.ok()) << lib.status().ToString();
    lib_ = std::move(lib).value();
    auto inv = lib_->Discover();
    ASSERT_TRUE(inv.ok()) << inv.status().ToString();
    inventory_ = *inv;
    cdi_ = std::make_unique<cdi::CdiSpecWriter>(dir_ + "/cdi", "k8s.gpu.nvidia.com");
    NewKind();
  }
  // A kind as the plugin builds it (its reset state beside the ledger); again
  // after a restart.
  void NewKind() {
    kind_.reset();
    GpuKindOptions o;
    o.resets.state_path = dir_ + "/time-slice-resets.json";
    kind_ = std::make_unique<GpuKind>(inventory_, GpuContainerEdits(devices::ContainerSources::ForLib(*lib_)),
                                      lib_->control(), o);
  }
  // A prepared claim on gpu-2 with a time slice: its undo record.
  nlohmann::json PrepareTimeSliced(const std::string& uid, const std::string& interval = "Medium") {
    auto w = Work({"gpu-2"});
    w.uid = uid;
    GpuConfig gc;
    gc.sharing = GpuSharing{"TimeSlicing", TimeSlicingConfig{interval}, std::nullopt};
    w.groups.push_back({gc, {}, {{"gpu", kDriverName, "node-1", "gpu-2", false, ""}}});
    auto plan = kind_->Plan(w);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    auto p = kind_->Prepare(w, *plan);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? p->undo : nlohmann::json();
  }
  void FailControlOf(const std::string& uuid) {
    ASSERT_TRUE(WriteFileAtomically(dir_ + "/mock/control-failures", uuid + "\n").ok());
  }
  void HealControl() { ASSERT_TRUE(RemoveFileIfExists(dir_ + "/mock/control-failures").ok()); }
  std::vector<std::string> Tainted(const std::string& key) {
    std::vector<std::string> out;
    for (const auto& d : kind_->PublishedDevices()) {
      for (const auto& t : d.taints) {
        if (t.key == key) out.push_back(d.name);
      }
    }
    return out;
  }
  driver::ClaimWork Work(std::vector<std::string> devices) {
    driver::ClaimWork w{"uid-1", "default", "c", {}, {}};
    for (const auto& d : devices) w.results.push_back({"gpu", kDriverName, "node-1", d, false, ""});
    return w;
  }
  std::string ControlLog() {
    auto s = ReadFileToString(dir_ + "/mock/state/control.log");
    return s.ok() ? *s : "";
  }

  ::nvdra::testing::TempDir tmp_{"nvdra-gpu-kind"};
  std::string dir_;
  std::unique_ptr<devices::DeviceLib> lib_;
  devices::NodeInventory inventory_;
  std::unique_ptr<cdi::CdiSpecWriter> cdi_;
  std::unique_ptr<GpuKind> kind_;
};

TEST_F(GpuKindTest, TypesAndPublishedDevicesFollowTheInventory) {
  Open("h100x8");
  EXPECT_EQ(kind_->DeviceType("gpu-0"), "gpu");
  EXPECT_EQ(kind_->DeviceType("gpu-7"), "gpu");
  EXPECT_EQ(kind_->DeviceType("gpu-8"), "");
  EXPECT_EQ(kind_->DeviceType("channel-0"), "");
  EXPECT_EQ(kind_->PublishedDevices().size(), 8u);
}

TEST_F(GpuKindTest, MigDevicesReplaceTheirParent) {
  Open("a100-mig");
  bool saw_mig = false;
  for (const auto& d : kind_->PublishedDevices()) {
    std::string t = kind_->DeviceType(d.name);
    EXPECT_FALSE(t.empty()) << d.name;
    if (t == "mig") saw_mig = true;
  }
  EXPECT_TRUE(saw_mig);
}

TEST_F(GpuKindTest, PrepareBuildsDeviceNodesAndCdiIds) {
  Open("h100x8");
  auto w = Work({"gpu-1", "gpu-3"});
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto p = kind_->Prepare(w, *plan);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  // The engine turns the kind's edits into devices, CDI ids and the spec.
  auto out = driver::BuildClaimOutput(*cdi_, w.uid, w.results, p->edits);
  ASSERT_EQ(out.devices.size(), 2u);
  EXPECT_EQ(out.devices[0].cdi_device_ids, std::vector<std::string>{"k8s.gpu.nvidia.com/claim=uid-1-gpu-1"});
  ASSERT_EQ(out.spec.devices.size(), 2u);
  std::string json = cdi::RenderJson(out.spec);
  EXPECT_NE(json.find("/dev/nvidia1"), std::string::npos);
  EXPECT_NE(json.find("/dev/nvidia3"), std::string::npos);
  EXPECT_NE(json.find("/dev/nvidiactl"), std::string::npos);
  EXPECT_EQ(json.find("/dev/nvidia2\""), std::string::npos);

  // The spec rebuilt from the undo record is byte-identical.
  auto again = kind_->Edits(p->undo, {"gpu-1", "gpu-3"});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(cdi::RenderJson(driver::BuildClaimOutput(*cdi_, w.uid, w.results, *again).spec), json);
  // A record imported from the Go driver names no devices: the ledger's do.
  auto legacy = kind_->Edits(nlohmann::json{{"legacyCheckpoint", nlohmann::json::object()}}, {"gpu-3", "gpu-1"});
  ASSERT_TRUE(legacy.ok()) << legacy.status().ToString();
  EXPECT_EQ(cdi::RenderJson(driver::BuildClaimOutput(*cdi_, w.uid, w.results, *legacy).spec), json);
}

TEST_F(GpuKindTest, TimeSlicingIsAppliedAndResetFromTheUndoRecord) {
  Open("h100x8");
  auto w = Work({"gpu-2"});
  GpuConfig gc;
  gc.sharing = GpuSharing{"TimeSlicing", TimeSlicingConfig{"Medium"}, std::nullopt};
  w.groups.push_back({gc, {}, {{"gpu", kDriverName, "node-1", "gpu-2", false, ""}}});
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto p = kind_->Prepare(w, *plan);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const std::string uuid = inventory_.gpus[2].uuid;
  EXPECT_EQ(ControlLog(), "SetComputeMode " + uuid + " DEFAULT\nSetTimeSlice " + uuid + " 2\n");
  ASSERT_TRUE(kind_->Unprepare("uid-1", p->undo).ok());
  EXPECT_EQ(ControlLog(),
            "SetComputeMode " + uuid + " DEFAULT\nSetTimeSlice " + uuid + " 2\nSetTimeSlice " + uuid + " 0\n");
}

// A GPU claim as the Go driver checkpoints it: `config_state` is its group's,
// `sharing` the GpuConfig's sharing ("" for no config).
std::string UpstreamGpuClaim(const std::string& device, const std::string& uuid, const std::string& config_state,
                             const std::string& sharing) {
  std::string config =
      sharing.empty()
          ? ""
          : R"(,"config":[{"source":"FromClaim","requests":["gpu"],"opaque":{"driver":"gpu.nvidia.com","parameters":{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":)" +
                sharing + "}}}]";
  return R"({"checkpointState":"PrepareCompleted","status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.nvidia.com","pool":"node-1","device":")" +
         device + R"("}])" + config + R"(}}},"preparedDevices":[{"devices":[{"gpu":{"info":{"uuid":")" + uuid +
         R"("},"device":{"Requests":["gpu"],"PoolName":"node-1","DeviceName":")" + device +
         R"(","CDIDeviceIDs":[]}},"mig":null}],"configState":)" + config_state + "}]}";
}

// The Go driver set a time slice for a claim prepared before the upgrade:
// Unprepare resets it as the Go driver would have (its configState says so
// since timeSliceApplied exists; before that, the claim's config does).
TEST_F(GpuKindTest, ATimeSliceTheGoDriverSetIsResetAtUnprepare) {
  Open("h100x8");
  const std::string u2 = inventory_.gpus[2].uuid, u3 = inventory_.gpus[3].uuid, u4 = inventory_.gpus[4].uuid;
  const std::string time_slicing = R"({"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Long"}})";
  const std::string a = "7a4e1a8e-0000-4000-8000-00000000000a", b = "7a4e1a8e-0000-4000-8000-00000000000b",
                    c = "7a4e1a8e-0000-4000-8000-00000000000c";
  std::string file = ledger::testing::GoCheckpointFile(
      "{\"" + a + "\":" +
          UpstreamGpuClaim("gpu-2", u2, R"({"mpsControlDaemonID":"","timeSliceApplied":true})", time_slicing) + ",\"" +
          b + "\":" + UpstreamGpuClaim("gpu-3", u3, R"({"mpsControlDaemonID":""})", R"({"strategy":"TimeSlicing"})") +
          ",\"" + c + "\":" + UpstreamGpuClaim("gpu-4", u4, R"({"mpsControlDaemonID":""})", "") + "}",
      "boot");
  GpuCheckpointCodec codec;
  auto imported = ledger::ParseLegacyCheckpoint(file, &codec, "boot");
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  ASSERT_EQ(imported->entries.size(), 3u);
  auto undo = DecodeGpuUndo(imported->entries[0].undo);
  ASSERT_TRUE(undo.ok()) << undo.status().ToString();
  EXPECT_EQ(undo->Of<TimeSlicingUndo>().items,
            (std::vector<TimeSliceUndo>{{"gpu-2", u2, 3, nlohmann::json::object()}}));
  for (const auto& e : imported->entries) ASSERT_TRUE(kind_->Unprepare(e.uid, e.undo).ok()) << e.uid;
  EXPECT_EQ(ControlLog(), "SetTimeSlice " + u2 + " 0\nSetTimeSlice " + u3 + " 0\n")
      << "the claim without time-slicing leaves its GPU alone";
  // Its devices' edits come from the ledger's prepared devices, as before.
  auto edits = kind_->Edits(imported->entries[0].undo, {"gpu-2"});
  ASSERT_TRUE(edits.ok()) << edits.status().ToString();
  ASSERT_EQ(edits->devices.size(), 1u);
  EXPECT_EQ(edits->devices[0].device, "gpu-2");
}

// A time-slice reset that keeps failing once wedged Unprepare for ever: the
// kubelet retried it, the claim was never released. Now the claim gets a
// bounded number of attempts, is then released, and the GPU is reported
// unhealthy and retried in the background until a reset succeeds.
TEST_F(GpuKindTest, AFailingTimeSliceResetReleasesTheClaimAfterBoundedAttemptsAndTaintsTheGpu) {
  Open("h100x8");
  auto source = kind_->NewOwnHealthSource();
  ASSERT_NE(source, nullptr);
  std::vector<devices::DeviceHealthEvent> events;
  Mutex mu;
  ASSERT_TRUE(source
                  ->Start(inventory_,
                          [&](const devices::DeviceHealthEvent& e) {
                            MutexLock l(mu);
                            events.push_back(e);
                          })
                  .ok());
  auto undo = PrepareTimeSliced("uid-1");
  const std::string uuid = inventory_.gpus[2].uuid;
  FailControlOf(uuid);
  for (int attempt = 1; attempt < 3; attempt++) {
    Status s = kind_->Unprepare("uid-1", undo);
    EXPECT_FALSE(s.ok()) << "attempt " << attempt;
    EXPECT_NE(s.message().find("attempt " + std::to_string(attempt) + " of 3"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("injected"), std::string::npos) << s.message();
    EXPECT_TRUE(Tainted(kTimeSliceResetTaintKey).empty());
  }
  EXPECT_TRUE(kind_->Unprepare("uid-1", undo).ok()) << "the last attempt releases the claim";
  EXPECT_EQ(Tainted(kTimeSliceResetTaintKey), std::vector<std::string>{"gpu-2"});
  {
    MutexLock l(mu);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].device, "gpu-2");
    EXPECT_EQ(events[0].state, devices::HealthState::kUnhealthy);
  }
  // The background retry keeps failing while the GPU does.
  EXPECT_FALSE(kind_->RunOwedWorkForTest().ok());
  EXPECT_EQ(Tainted(kTimeSliceResetTaintKey), std::vector<std::string>{"gpu-2"});
  HealControl();
  EXPECT_TRUE(kind_->RunOwedWorkForTest().ok());
  EXPECT_TRUE(Tainted(kTimeSliceResetTaintKey).empty());
  EXPECT_NE(ControlLog().find("SetTimeSlice " + uuid + " 0\n"), std::string::npos) << ControlLog();
  {
    MutexLock l(mu);
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[1].device, "gpu-2");
    EXPECT_EQ(events[1].state, devices::HealthState::kHealthy);
  }
  source->Stop();
}

// Both the attempts and the owed reset outlive a restart of the plugin:
// nothing else remembers what a released claim left on the GPU.
TEST_F(GpuKindTest, TimeSliceResetAttemptsAndOwedResetsSurviveARestart) {
  Open("h100x8");
  auto undo = PrepareTimeSliced("uid-1");
  FailControlOf(inventory_.gpus[2].uuid);
  EXPECT_FALSE(kind_->Unprepare("uid-1", undo).ok());
  EXPECT_FALSE(kind_->Unprepare("uid-1", undo).ok());
  NewKind();
  EXPECT_TRUE(kind_->Unprepare("uid-1", undo).ok()) << "the third attempt overall is the last";
  NewKind();
  EXPECT_EQ(Tainted(kTimeSliceResetTaintKey), std::vector<std::string>{"gpu-2"});
  auto source = kind_->NewOwnHealthSource();
  std::vector<devices::DeviceHealthEvent> events;
  ASSERT_TRUE(source->Start(inventory_, [&](const devices::DeviceHealthEvent& e) { events.push_back(e); }).ok());
  ASSERT_EQ(events.size(), 1u) << "reported unhealthy again at start";
  EXPECT_EQ(events[0].device, "gpu-2");
  EXPECT_EQ(events[0].state, devices::HealthState::kUnhealthy);
  // The source uses the kind's resets: it goes first, as the plugin stops
  // its health sources before the kind.
  source.reset();
  HealControl();
  EXPECT_TRUE(kind_->RunOwedWorkForTest().ok());
  NewKind();
  EXPECT_TRUE(Tainted(kTimeSliceResetTaintKey).empty());
}

// A new claim that sets the GPU's time slice owns the setting: the owed
// reset is dropped, so the background retry never resets that claim's time
// slice under it.
TEST_F(GpuKindTest, ANewClaimSettingTheTimeSliceSettlesTheOwedReset) {
  Open("h100x8");
  auto undo = PrepareTimeSliced("uid-1");
  const std::string uuid = inventory_.gpus[2].uuid;
  FailControlOf(uuid);
  for (int i = 0; i < 3; i++) (void)kind_->Unprepare("uid-1", undo);
  ASSERT_EQ(Tainted(kTimeSliceResetTaintKey), std::vector<std::string>{"gpu-2"});
  HealControl();
  PrepareTimeSliced("uid-2", "Long");
  EXPECT_TRUE(Tainted(kTimeSliceResetTaintKey).empty());
  std::string before = ControlLog();
  EXPECT_TRUE(kind_->RunOwedWorkForTest().ok());
  EXPECT_EQ(ControlLog(), before) << "no reset behind the new claim's back";
  EXPECT_EQ(before.substr(before.rfind("SetTimeSlice")), "SetTimeSlice " + uuid + " 3\n");
}

// Through the engine, as the kubelet drives it: the failed attempts are
// errors the kubelet retries; the last one releases the claim (tombstone, no
// CDI spec) and a new claim can be prepared on the GPU.
TEST_F(GpuKindTest, TheEngineReleasesAClaimWhoseTimeSliceResetKeepsFailing) {
  Open("h100x8");
  ASSERT_TRUE(cdi_->EnsureRoot().ok());
  auto ledger = driver::testing::OpenTestLedger(dir_);
  ASSERT_TRUE(ledger.ok()) << ledger.status().ToString();
  driver::testing::FakeClaimSource claims;
  driver::ClaimSnapshot c;
  c.uid = "uid-1";
  c.ns = "default";
  c.name = "shared";
  c.allocated = true;
  c.results = {{"gpu", kDriverName, "node-1", "gpu-2", false, ""}};
  config::ClaimConfig cc;
  cc.requests = {"gpu"};
  cc.driver = kDriverName;
  cc.parameters_json = R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig",)"
                       R"("sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Long"}}})";
  c.configs = {cc};
  c.consumers = {"pod-1"};
  claims.Put(c);
  driver::EngineOptions eo;
  eo.node_name = "node-1";
  auto gates = config::FeatureGates::Parse("TimeSlicingSettings=true");
  ASSERT_TRUE(gates.ok()) << gates.status().ToString();
  eo.gates = *gates;
  driver::Engine engine(eo, **ledger, *kind_, claims, *cdi_, nullptr);
  const auto far = std::chrono::steady_clock::now() + std::chrono::hours(1);
  model::ClaimRef ref{"default", "uid-1", "shared"};
  auto prepared = engine.PrepareClaim(ref, far);
  ASSERT_EQ(prepared.status().message(), "");
  const std::string spec = *cdi_->ClaimSpecPath("uid-1");
  ASSERT_TRUE(PathExists(spec));
  FailControlOf(inventory_.gpus[2].uuid);
  EXPECT_NE(engine.UnprepareClaim(ref, far).message(), "");
  EXPECT_NE(engine.UnprepareClaim(ref, far).message(), "");
  EXPECT_TRUE(PathExists(spec)) << "kept while the kubelet retries";
  EXPECT_EQ(engine.UnprepareClaim(ref, far).message(), "");
  auto entry = (*ledger)->Get("uid-1");
  ASSERT_TRUE(entry.ok() && entry->has_value());
  EXPECT_EQ((*entry)->state, ledger::ClaimState::kTombstone);
  EXPECT_FALSE(PathExists(spec));
  EXPECT_EQ(Tainted(kTimeSliceResetTaintKey), std::vector<std::string>{"gpu-2"});
}

TEST_F(GpuKindTest, UnprepareToleratesRecordsItDoesNotUnderstand) {
  Open("h100x8");
  auto undo = nlohmann::json::parse(R"({"version": 99, "timeSlicing": [42, {"uuid": "GPU-gone"}], "future": {}})");
  EXPECT_TRUE(kind_->Unprepare("uid-1", undo).ok());
  EXPECT_TRUE(kind_->Unprepare("uid-1", "not an object").ok());
  EXPECT_EQ(ControlLog(), "");
}

// MPS daemons are set up only with the gate and an image (main.cc); a kind
// without them refuses an MPS claim at Plan, before anything durable.
TEST_F(GpuKindTest, MpsWithoutItsDaemonsSetUpIsRefusedClearly) {
  Open("h100x8");
  auto w = Work({"gpu-0"});
  GpuConfig gc;
  gc.sharing = GpuSharing{"MPS", std::nullopt, MpsConfig{}};
  w.groups.push_back({gc, {}, {{"gpu", kDriverName, "node-1", "gpu-0", false, ""}}});
  auto plan = kind_->Plan(w);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(plan.status().message(), "MPS sharing needs the MPSSupport feature gate and --image-name (IMAGE_NAME)");
}

// A requested device held by another claim is refused as upstream's GPU
// plugin refuses it; what upstream does not check (a memory slice two MIG
// placements share) keeps the ledger's sentence, naming the resource.
TEST(GpuCheckpointCodecTest, RefusalsUseUpstreamsWordsForARequestedDevice) {
  GpuCheckpointCodec codec;
  EXPECT_EQ(codec.HeldByAnotherClaim("gpu-0", "uid-a", {"gpu-0"}),
            "requested device gpu-0 is already allocated to different claim uid-a");
  EXPECT_EQ(codec.HeldByAnotherClaim("gpu-0 memory-slice-3", "uid-a", {"gpu-0-mig-1g10gb-19-3"}),
            "gpu-0 memory-slice-3 already allocated by claim uid-a (according to checkpoint)");
}

// Each registered device type serves its own devices, with its own config
// kind as the default, and every published device is one of them.
TEST_F(GpuKindTest, DeviceTypesAreTheRegisteredHandlers) {
  Open("a100-mig");
  auto rules = GpuConfigRules(config::FeatureGates());
  ASSERT_EQ(rules.device_types.size(), RegisteredDeviceTypes(config::FeatureGates()).size());
  ASSERT_EQ(rules.defaults.size(), RegisteredDeviceTypes(config::FeatureGates()).size());
  std::set<std::string> names;
  for (size_t i = 0; i < rules.device_types.size(); ++i) {
    EXPECT_EQ(rules.device_types[i].config_kind, config::KindOf(rules.defaults[i]));
    EXPECT_TRUE(names.insert(rules.device_types[i].type).second) << "two types serve " << rules.device_types[i].type;
  }
  std::set<std::string> types;
  for (const auto& d : kind_->PublishedDevices()) {
    std::string type = kind_->DeviceType(d.name);
    EXPECT_EQ(std::get<std::string>(d.attributes.at("type")), type) << d.name;
    types.insert(type);
  }
  EXPECT_EQ(types, (std::set<std::string>{"gpu", "mig"}));
  EXPECT_EQ(kind_->DeviceType("gpu-2-mig-1g5gb-19-6"), "mig");
  EXPECT_EQ(kind_->DeviceType("gpu-0"), "gpu");
  EXPECT_EQ(kind_->DeviceType("gpu-2"), "") << "a MIG-enabled GPU is published as its MIG devices only";
}

// A strategy the config layer knows but no handler serves is an internal
// error, never a silent prepare without the sharing asked for.
TEST_F(GpuKindTest, EveryValidatedStrategyHasAHandler) {
  Open("h100x8");
  for (const char* strategy : {"TimeSlicing", "MPS"}) {
    auto w = Work({"gpu-0"});
    GpuConfig gc;
    gc.sharing = GpuSharing{strategy, std::nullopt, std::nullopt};
    w.groups.push_back({gc, {}, {{"gpu", kDriverName, "node-1", "gpu-0", false, ""}}});
    auto plan = kind_->Plan(w);
    EXPECT_NE(plan.status().code(), StatusCode::kInternal) << strategy;
  }
  auto w = Work({"gpu-0"});
  GpuConfig gc;
  gc.sharing = GpuSharing{"Telepathy", std::nullopt, std::nullopt};
  w.groups.push_back({gc, {}, {{"gpu", kDriverName, "node-1", "gpu-0", false, ""}}});
  EXPECT_EQ(kind_->Plan(w).status().code(), StatusCode::kInternal);
}

// A device type with node-side work (as dynamic MIG and passthrough will
// be): full GPUs that record, at Plan, which devices they will touch, and
// log what Prepare and Unprepare do with that record alone.
class RecordingGpuType final : public GpuDeviceType {
 public:
  explicit RecordingGpuType(std::vector<std::string>& log) : log_(log) {}
  std::string_view name() const override { return inner_.name(); }
  std::string_view config_kind() const override { return inner_.config_kind(); }
  std::optional<config::Config> DefaultConfig(const config::FeatureGates& g) const override {
    return inner_.DefaultConfig(g);
  }
  std::vector<GpuDevice> Devices(const devices::NodeInventory& inv) const override {
    auto out = inner_.Devices(inv);
    for (auto& d : out) d.type = this;
    return out;
  }
  model::PublishedDevice Publish(const GpuDevice& d) const override { return inner_.Publish(d); }
  Result<cdi::ContainerEdits> Edits(const GpuDevice& d, const GpuContainerEdits& e) const override {
    return inner_.Edits(d, e);
  }
  Status Plan(const std::vector<const GpuDevice*>& devices, GpuUndo& undo) const override {
    for (const auto* d : devices) undo.unknown["recorded"].push_back(d->name);
    return Status::Ok();
  }
  Status Apply(GpuUndo& undo) override {
    log_.push_back("apply " + undo.unknown.value("recorded", nlohmann::json::array()).dump());
    return Status::Ok();
  }
  Status Undo(const std::string& uid, const GpuUndo& undo) override {
    log_.push_back("undo " + uid + " " + undo.unknown.value("recorded", nlohmann::json::array()).dump());
    return Status::Ok();
  }

 private:
  FullGpuType inner_{{StaticMigGpuDecoration()}};
  std::vector<std::string>& log_;
};

TEST_F(GpuKindTest, DeviceTypeNodeWorkIsPlannedAppliedAndUndoneFromTheRecord) {
  Open("h100x8");
  std::vector<std::string> log;
  std::vector<std::unique_ptr<GpuDeviceType>> types;
  types.push_back(std::make_unique<RecordingGpuType>(log));
  GpuKind kind(inventory_, GpuContainerEdits(devices::ContainerSources::ForLib(*lib_)), lib_->control(), {},
               std::move(types));
  EXPECT_EQ(kind.DeviceType("gpu-3"), "gpu");
  auto w = Work({"gpu-3", "gpu-1"});
  auto plan = kind.Plan(w);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(log.empty()) << "Plan does nothing on the node";
  auto prepared = kind.Prepare(w, *plan);
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0], R"(apply ["gpu-1","gpu-3"])");
  // Unprepare has the ledger's copy of the record only (a JSON round trip).
  auto stored = nlohmann::json::parse(prepared->undo.dump());
  ASSERT_TRUE(kind.Unprepare("uid-1", stored).ok());
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[1], R"(undo uid-1 ["gpu-1","gpu-3"])");
}

}  // namespace
}  // namespace nvdra::gpu
