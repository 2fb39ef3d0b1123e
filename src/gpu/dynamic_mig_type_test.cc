#include "gpu/dynamic_mig_type.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "cdi/spec.h"
#include "devices/backends/open_device_lib.h"
#include "devices/mock/mock_device_lib.h"
#include "driver/engine.h"
#include "driver/engine_test_util.h"
#include "gpu/gpu_kind.h"
#include "gpu/gpu_test_util.h"
#include "gpu/mig_counters.h"
#include "ledger/claim_ledger.h"
#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::gpu {
namespace {

// On the dynamic-mig mock: gpu-0 an H100 with MIG mode off, gpu-1 an H100
// with it on, gpu-2 an A100 with it off, gpu-3 an A100 with it on.
class DynamicMigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path();
    Status opened = testing::OpenMockNode("dynamic-mig", dir_, lib_, inventory_);
    ASSERT_TRUE(opened.ok()) << opened.ToString();
    cdi_ = std::make_unique<cdi::CdiSpecWriter>(dir_ + "/cdi", "k8s.gpu.nvidia.com");
    auto gates = config::FeatureGates::Parse("DynamicMIG=true");
    ASSERT_TRUE(gates.ok()) << gates.status().ToString();
    gates_ = *gates;
    GpuKindOptions ko;
    ko.gates = gates_;
    ko.resets.state_path = dir_ + "/time-slice-resets.json";
    kind_ = std::make_unique<GpuKind>(inventory_, GpuContainerEdits(devices::ContainerSources::ForLib(*lib_)),
                                      lib_->control(), ko);
  }
  driver::ClaimWork Work(const std::string& uid, std::vector<std::string> devices) {
    driver::ClaimWork w{uid, "default", "c-" + uid, {}, {}};
    for (const auto& d : devices) w.results.push_back({"mig", kDriverName, "node-1", d, false, ""});
    return w;
  }
  const model::PublishedDevice* Published(const std::string& name) {
    published_ = kind_->PublishedDevices();
    for (const auto& d : published_) {
      if (d.name == name) return &d;
    }
    return nullptr;
  }
  std::vector<devices::MigInstance> Instances(int gpu) {
    auto l = lib_->control().ListMigInstances(inventory_.gpus[gpu].uuid);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    return l.ok() ? *l : std::vector<devices::MigInstance>{};
  }
  bool MigMode(int gpu) { return *lib_->control().MigModeEnabled(inventory_.gpus[gpu].uuid); }
  std::string ControlLog() {
    auto s = ReadFileToString(dir_ + "/mock/state/control.log");
    return s.ok() ? *s : "";
  }

  ::nvdra::testing::TempDir tmp_{"nvdra-dynamic-mig"};
  std::string dir_;
  std::unique_ptr<devices::DeviceLib> lib_;
  devices::NodeInventory inventory_;
  config::FeatureGates gates_;
  std::unique_ptr<cdi::CdiSpecWriter> cdi_;
  std::unique_ptr<GpuKind> kind_;
  std::vector<model::PublishedDevice> published_;
};

TEST(MigCountersTest, QuantitiesAreBinarySi) {
  EXPECT_EQ(BinarySiQuantity(0), "0");
  EXPECT_EQ(BinarySiQuantity(14), "14");
  EXPECT_EQ(BinarySiQuantity(9984ull << 20), "9984Mi");
  EXPECT_EQ(BinarySiQuantity(80896ull << 20), "79Gi");
  EXPECT_EQ(BinarySiQuantity(1000), "1000");
}

TEST_F(DynamicMigTest, PublishesEveryPlacementAndTheFullGpusUpstreamWould) {
  std::vector<std::string> names;
  for (const auto& d : kind_->PublishedDevices()) names.push_back(d.name);
  auto has = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) != names.end(); };
  // 25 placements per GPU (7 + 7 + 4 + 3 + 2 + 1 + 1) on gpu-0, gpu-1 and gpu-3.
  EXPECT_EQ(names.size(), 3u * 25 + 3);
  EXPECT_TRUE(has("gpu-0"));
  EXPECT_TRUE(has("gpu-1")) << "an H100 leaves MIG mode without a reset";
  EXPECT_TRUE(has("gpu-2"));
  EXPECT_FALSE(has("gpu-3")) << "an A100 in MIG mode cannot be a full GPU";
  EXPECT_TRUE(has("gpu-0-mig-1g10gb-19-6"));
  EXPECT_TRUE(has("gpu-0-mig-1g10gb-me-20-0"));
  EXPECT_TRUE(has("gpu-1-mig-7g80gb-0-0"));
  EXPECT_TRUE(has("gpu-3-mig-3g20gb-9-4"));
  EXPECT_FALSE(has("gpu-2-mig-1g5gb-19-0")) << "an A100 with MIG mode off stays a plain GPU";
  EXPECT_EQ(kind_->DeviceType("gpu-0-mig-3g40gb-9-4"), "mig");
}

TEST_F(DynamicMigTest, CountersAndConsumptionAreUpstreams) {
  const model::PublishedDevice* full = Published("gpu-0");
  ASSERT_NE(full, nullptr);
  ASSERT_EQ(full->counter_sets.size(), 1u);
  const model::CounterSet& set = full->counter_sets[0];
  EXPECT_EQ(set.name, "gpu-0-counter-set");
  std::map<std::string, std::string> want = {{"multiprocessors", "132"}, {"copy-engines", "8"}, {"decoders", "7"},
                                             {"encoders", "0"},          {"jpeg-engines", "7"}, {"ofa-engines", "1"},
                                             {"memory", "79Gi"}};
  for (int i = 0; i < 8; ++i) want["memory-slice-" + std::to_string(i)] = "1";
  EXPECT_EQ(set.counters, want);
  ASSERT_EQ(full->consumes_counters.size(), 1u);
  EXPECT_EQ(full->consumes_counters[0].counter_set, "gpu-0-counter-set");
  EXPECT_EQ(full->consumes_counters[0].counters, want);
  EXPECT_EQ(full->capacity.at("memory"), "79Gi");

  const model::PublishedDevice* mig = Published("gpu-0-mig-3g40gb-9-4");
  ASSERT_NE(mig, nullptr);
  EXPECT_EQ(std::get<std::string>(mig->attributes.at("type")), "mig");
  EXPECT_EQ(std::get<std::string>(mig->attributes.at("profile")), "3g.40gb");
  EXPECT_EQ(std::get<std::string>(mig->attributes.at("parentUUID")), inventory_.gpus[0].uuid);
  EXPECT_EQ(std::get<std::string>(mig->attributes.at("resource.kubernetes.io/pciBusID")), "0000:18:00.0");
  EXPECT_EQ(mig->attributes.count("uuid"), 0u) << "the MIG device does not exist yet";
  EXPECT_EQ(mig->capacity, (std::map<std::string, std::string>{{"multiprocessors", "60"},
                                                               {"copyEngines", "3"},
                                                               {"decoders", "3"},
                                                               {"encoders", "0"},
                                                               {"jpegEngines", "3"},
                                                               {"ofaEngines", "0"},
                                                               {"memory", "40320Mi"}}));
  ASSERT_EQ(mig->consumes_counters.size(), 1u);
  EXPECT_EQ(mig->consumes_counters[0].counters, (std::map<std::string, std::string>{{"multiprocessors", "60"},
                                                                                    {"copy-engines", "3"},
                                                                                    {"decoders", "3"},
                                                                                    {"encoders", "0"},
                                                                                    {"jpeg-engines", "3"},
                                                                                    {"ofa-engines", "0"},
                                                                                    {"memory", "40320Mi"},
                                                                                    {"memory-slice-4", "1"},
                                                                                    {"memory-slice-5", "1"},
                                                                                    {"memory-slice-6", "1"},
                                                                                    {"memory-slice-7", "1"}}));
  const model::PublishedDevice* plain = Published("gpu-2");
  ASSERT_NE(plain, nullptr);
  EXPECT_TRUE(plain->consumes_counters.empty());
  EXPECT_EQ(plain->capacity, (std::map<std::string, std::string>{{"memory", "42949672960"}}));
}

TEST_F(DynamicMigTest, ClaimsHoldTheirMemorySlices) {
  auto mig = kind_->Plan(Work("uid-1", {"gpu-0-mig-3g40gb-9-4"}));
  ASSERT_TRUE(mig.ok()) << mig.status().ToString();
  EXPECT_EQ(mig->held, (std::vector<std::string>{"gpu-0 memory-slice-4", "gpu-0 memory-slice-5", "gpu-0 memory-slice-6",
                                                 "gpu-0 memory-slice-7", "gpu-0-mig-3g40gb-9-4"}));
  auto full = kind_->Plan(Work("uid-2", {"gpu-0"}));
  ASSERT_TRUE(full.ok());
  ASSERT_EQ(full->held.size(), 9u);
  EXPECT_EQ(full->held.front(), "gpu-0");
  EXPECT_EQ(full->held.back(), "gpu-0 memory-slice-7");
  auto plain = kind_->Plan(Work("uid-3", {"gpu-2"}));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->held, std::vector<std::string>{"gpu-2"});
  // The record names the placement before anything is created.
  auto undo = DecodeGpuUndo(mig->undo);
  ASSERT_TRUE(undo.ok());
  ASSERT_EQ(undo->Of<MigUndo>().devices.size(), 1u);
  EXPECT_EQ(undo->Of<MigUndo>().devices[0].gi_profile_id, 9);
  EXPECT_EQ(undo->Of<MigUndo>().devices[0].placement_start, 4);
  EXPECT_FALSE(undo->Of<MigUndo>().devices[0].gi_id.has_value());
  EXPECT_TRUE(Instances(0).empty());
}

TEST_F(DynamicMigTest, PrepareCreatesTheMigDeviceAndUnprepareDestroysIt) {
  auto w = Work("uid-1", {"gpu-0-mig-1g10gb-19-2"});
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_FALSE(MigMode(0));
  auto p = kind_->Prepare(w, *plan);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(MigMode(0)) << "enabled for the MIG device";
  auto instances = Instances(0);
  ASSERT_EQ(instances.size(), 1u);
  EXPECT_EQ(instances[0].gi_profile_id, 19);
  EXPECT_EQ(instances[0].placement_start, 2);
  auto undo = DecodeGpuUndo(p->undo);
  ASSERT_TRUE(undo.ok());
  EXPECT_EQ(undo->Of<MigUndo>().devices[0].gi_id, instances[0].gi_id);
  EXPECT_EQ(undo->Of<MigUndo>().devices[0].uuid, instances[0].uuid);
  // The container gets the parent's nodes and the MIG device's caps nodes.
  auto out = driver::BuildClaimOutput(*cdi_, w.uid, w.results, p->edits);
  std::string json = cdi::RenderJson(out.spec);
  const int gi = instances[0].gi_id;
  EXPECT_NE(json.find("/dev/nvidia0\""), std::string::npos) << json;
  EXPECT_NE(json.find("/dev/nvidia-caps/nvidia-cap" + std::to_string(devices::MockDeviceLib::MigGiCapMinor(0, gi))),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("/dev/nvidia-caps/nvidia-cap" + std::to_string(devices::MockDeviceLib::MigCiCapMinor(0, gi, 0))),
            std::string::npos);
  // A repeated Prepare takes the device that is there.
  auto again = kind_->Prepare(w, *plan);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(Instances(0).size(), 1u);
  EXPECT_EQ(cdi::RenderJson(driver::BuildClaimOutput(*cdi_, w.uid, w.results, again->edits).spec), json);

  ASSERT_TRUE(kind_->Unprepare("uid-1", p->undo).ok());
  EXPECT_TRUE(Instances(0).empty());
  EXPECT_FALSE(MigMode(0)) << "an H100 leaves MIG mode with its last MIG device";
  EXPECT_TRUE(kind_->Unprepare("uid-1", p->undo).ok()) << "idempotent";
}

TEST_F(DynamicMigTest, AnAmpereGpuStaysInMigMode) {
  auto w = Work("uid-1", {"gpu-3-mig-1g5gb-19-0"});
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok());
  auto p = kind_->Prepare(w, *plan);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(Instances(3).size(), 1u);
  ASSERT_TRUE(kind_->Unprepare("uid-1", p->undo).ok());
  EXPECT_TRUE(Instances(3).empty());
  EXPECT_TRUE(MigMode(3));
  EXPECT_EQ(ControlLog().find("SetMigMode"), std::string::npos);
}

// A crash after the MIG device was created, before its record was completed:
// Unprepare of the PrepareStarted record finds it by its placement.
TEST_F(DynamicMigTest, UnprepareOfThePlanRecordDestroysWhatACrashLeft) {
  auto w = Work("uid-1", {"gpu-1-mig-2g20gb-14-4"});
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok());
  ASSERT_TRUE(lib_->control().CreateMigInstance(inventory_.gpus[1].uuid, 14, 1, 4).ok());
  ASSERT_TRUE(lib_->control().CreateMigInstance(inventory_.gpus[1].uuid, 19, 0, 0).ok());
  ASSERT_TRUE(kind_->Unprepare("uid-1", plan->undo).ok());
  auto left = Instances(1);
  ASSERT_EQ(left.size(), 1u) << "another placement is not the claim's";
  EXPECT_EQ(left[0].placement_start, 0);
  EXPECT_TRUE(MigMode(1));
}

// A control whose GPU shows a GPU instance without a compute instance at a
// placement (what NVML lists after a crash between the two creations).
class IncompleteInstanceControl final : public devices::GpuControl {
 public:
  IncompleteInstanceControl(devices::GpuControl& real, devices::MigInstance incomplete)
      : real_(real), incomplete_(std::move(incomplete)) {}
  Status SetTimeSlice(const std::string& u, int i) override { return real_.SetTimeSlice(u, i); }
  Status SetComputeMode(const std::string& u, const std::string& m) override { return real_.SetComputeMode(u, m); }
  Result<bool> MigModeEnabled(const std::string& u) override { return real_.MigModeEnabled(u); }
  Status SetMigMode(const std::string& u, bool e) override { return real_.SetMigMode(u, e); }
  Result<std::vector<devices::MigInstance>> ListMigInstances(const std::string& u) override {
    NVDRA_ASSIGN_OR_RETURN(auto list, real_.ListMigInstances(u));
    if (present_ && u == incomplete_.parent_uuid) list.push_back(incomplete_);
    return list;
  }
  Result<devices::MigInstance> CreateMigInstance(const std::string& u, int g, int c, int s) override {
    if (present_ && u == incomplete_.parent_uuid && s == incomplete_.placement_start) {
      return AlreadyExists("placement taken by the incomplete GPU instance");
    }
    return real_.CreateMigInstance(u, g, c, s);
  }
  Status DestroyMigInstance(const std::string& u, int gi, int ci) override {
    if (present_ && u == incomplete_.parent_uuid && gi == incomplete_.gi_id && ci == incomplete_.ci_id) {
      present_ = false;
      return Status::Ok();
    }
    return real_.DestroyMigInstance(u, gi, ci);
  }
  bool present() const { return present_; }

 private:
  devices::GpuControl& real_;
  devices::MigInstance incomplete_;
  bool present_ = true;
};

TEST_F(DynamicMigTest, AGpuInstanceWithoutComputeInstanceIsReplacedAtPrepare) {
  const std::string gpu = inventory_.gpus[1].uuid;
  IncompleteInstanceControl control(lib_->control(), {gpu, 14, 1, 2, 2, 6, -1, ""});
  GpuKindOptions ko;
  ko.gates = gates_;
  ko.resets.state_path = dir_ + "/time-slice-resets-2.json";
  GpuKind kind(inventory_, GpuContainerEdits(devices::ContainerSources::ForLib(*lib_)), control, ko);
  auto w = Work("uid-1", {"gpu-1-mig-2g20gb-14-2"});
  auto plan = kind.Plan(w);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto p = kind.Prepare(w, *plan);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_FALSE(control.present()) << "the incomplete GPU instance is destroyed";
  auto instances = Instances(1);
  ASSERT_EQ(instances.size(), 1u);
  auto undo = DecodeGpuUndo(p->undo);
  ASSERT_TRUE(undo.ok());
  EXPECT_EQ(undo->Of<MigUndo>().devices[0].uuid, instances[0].uuid)
      << "the claim has a complete MIG device, not the remnant";
  EXPECT_FALSE(undo->Of<MigUndo>().devices[0].uuid.empty());
}

TEST_F(DynamicMigTest, TheSweepDestroysMigDevicesNoRecordOwns) {
  auto w = Work("uid-1", {"gpu-0-mig-3g40gb-9-0"});
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok());
  auto p = kind_->Prepare(w, *plan);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(lib_->control().CreateMigInstance(inventory_.gpus[0].uuid, 9, 2, 4).ok());  // leaked
  ASSERT_TRUE(lib_->control().CreateMigInstance(inventory_.gpus[3].uuid, 0, 4, 0).ok());  // leaked
  std::vector<HeldRecord> records = {p->undo, nlohmann::json::parse(R"({"version": 99, "mig": 3})")};
  auto swept = kind_->SweepOrphans([&]() -> Result<std::vector<HeldRecord>> { return records; });
  ASSERT_TRUE(swept.ok()) << swept.status().ToString();
  EXPECT_EQ(*swept, 2);
  auto left = Instances(0);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].placement_start, 0);
  EXPECT_TRUE(Instances(3).empty());
  auto none = kind_->SweepOrphans([&]() -> Result<std::vector<HeldRecord>> { return records; });
  EXPECT_EQ(*none, 0);
}

TEST_F(DynamicMigTest, TheSweepAtStartTurnsIdleMigModeOffAsUpstream) {
  ASSERT_TRUE(MigMode(1));
  ASSERT_TRUE(MigMode(3));
  std::vector<HeldRecord> records;
  auto periodic = kind_->SweepOrphans([&]() -> Result<std::vector<HeldRecord>> { return records; });
  ASSERT_TRUE(periodic.ok()) << periodic.status().ToString();
  EXPECT_TRUE(MigMode(1)) << "only the pass at start turns MIG mode off";
  // A claim planned on gpu-0 (MIG mode on for it, its device not yet made)
  // keeps gpu-0 in MIG mode.
  auto w = Work("uid-1", {"gpu-0-mig-1g10gb-19-0"});
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok());
  ASSERT_TRUE(lib_->control().SetMigMode(inventory_.gpus[0].uuid, true).ok());
  records = {plan->undo};
  auto at_start = kind_->SweepOrphans([&]() -> Result<std::vector<HeldRecord>> { return records; },
                                      /*disable_idle_mig_mode=*/true);
  ASSERT_TRUE(at_start.ok()) << at_start.status().ToString();
  EXPECT_TRUE(MigMode(0)) << "a record names a placement on it";
  EXPECT_FALSE(MigMode(1)) << "an H100 without MIG devices leaves MIG mode";
  EXPECT_TRUE(MigMode(3)) << "an A100 would need a reset";
}

TEST_F(DynamicMigTest, UnprepareWithoutTheGateStillDestroysTheMigDevice) {
  auto w = Work("uid-1", {"gpu-0-mig-1g20gb-15-6"});
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok());
  auto p = kind_->Prepare(w, *plan);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(Instances(0).size(), 1u);
  GpuKind without(inventory_, GpuContainerEdits(devices::ContainerSources::ForLib(*lib_)), lib_->control(), {});
  ASSERT_TRUE(without.Unprepare("uid-1", p->undo).ok());
  EXPECT_TRUE(Instances(0).empty());
}

TEST_F(DynamicMigTest, WithoutTheGateMigDevicesAreStatic) {
  GpuKind kind(inventory_, GpuContainerEdits(devices::ContainerSources::ForLib(*lib_)), lib_->control(), {});
  std::vector<std::string> names;
  for (const auto& d : kind.PublishedDevices()) {
    names.push_back(d.name);
    EXPECT_TRUE(d.consumes_counters.empty()) << d.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"gpu-0", "gpu-2"}));
}

// The dynamic MIG type on the NVML backend, against the fake
// libnvidia-ml.so.1: an H100 with MIG mode off, its placements discovered
// through NVML, a MIG device created, taken again, swept and destroyed.
class DynamicMigNvmlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cfg = nlohmann::json::parse(R"({
      "driverVersion": "570.158.01", "cudaDriverVersion": 12080,
      "devices": [{"minor": 0, "uuid": "GPU-11111111-2222-3333-4444-555555555555",
        "name": "NVIDIA H100 80GB HBM3", "brand": 14, "arch": 9, "cc": [9, 0], "busId": "00000000:3B:00.0",
        "memoryTotal": 85520809984, "migMode": 0,
        "giProfiles": [
          {"index": 0, "id": 19, "slices": 1, "sms": 16, "ce": 1, "dec": 1, "jpeg": 1, "memoryMB": 9984,
           "name": "MIG 1g.10gb", "placements": [[0, 1], [1, 1], [2, 1], [3, 1], [4, 1], [5, 1], [6, 1]]},
          {"index": 1, "id": 14, "slices": 2, "sms": 32, "ce": 2, "dec": 2, "jpeg": 2, "memoryMB": 20096,
           "name": "MIG 2g.20gb", "placements": [[0, 2], [2, 2], [4, 2]]},
          {"index": 4, "id": 0, "slices": 7, "sms": 132, "ce": 8, "dec": 7, "jpeg": 7, "ofa": 1, "memoryMB": 80896,
           "name": "MIG 7g.80gb", "placements": [[0, 8]]}]}]})");
    std::string path = tmp_.path() + "/nvml.json";
    ASSERT_TRUE(WriteFileAtomically(path, cfg.dump(), 0644, false).ok());
    ::setenv("FAKE_NVML_CONFIG", path.c_str(), 1);
    devices::DeviceLibOptions o;
    o.container_driver_root = NVDRA_FAKE_NVML_ROOT;
    o.host_driver_root = "/";
    o.sysfs_root = tmp_.path() + "/sys";
    auto lib = devices::OpenDeviceLib(o);
    ASSERT_TRUE(lib.ok()) << lib.status().ToString();
    lib_ = std::move(lib).value();
    ASSERT_EQ(lib_->backend_name(), "nvml");
    auto inv = lib_->Discover();
    ASSERT_TRUE(inv.ok()) << inv.status().ToString();
    inventory_ = *inv;
    type_ = std::make_unique<DynamicMigType>(&lib_->control(), &inventory_);
  }
  void TearDown() override { ::unsetenv("FAKE_NVML_CONFIG"); }

  GpuUndo Planned(const std::string& name) {
    devices_ = type_->Devices(inventory_);
    GpuUndo undo;
    for (const auto& d : devices_) {
      if (d.name == name) EXPECT_TRUE(type_->Plan({&d}, undo).ok());
    }
    EXPECT_EQ(undo.Of<MigUndo>().devices.size(), 1u) << name;
    return undo;
  }
  std::vector<devices::MigInstance> Instances() {
    auto l = lib_->control().ListMigInstances(kGpu);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    return l.ok() ? *l : std::vector<devices::MigInstance>{};
  }
  bool MigMode() { return *lib_->control().MigModeEnabled(kGpu); }

  static constexpr const char* kGpu = "GPU-11111111-2222-3333-4444-555555555555";
  ::nvdra::testing::TempDir tmp_{"nvdra-dynamic-mig-nvml"};
  std::unique_ptr<devices::DeviceLib> lib_;
  devices::NodeInventory inventory_;
  std::unique_ptr<DynamicMigType> type_;
  std::vector<GpuDevice> devices_;
};

TEST_F(DynamicMigNvmlTest, PublishesNvmlsPlacementsAndCreatesAndDestroysThroughIt) {
  std::vector<std::string> names;
  for (const auto& d : type_->Devices(inventory_)) names.push_back(d.name);
  EXPECT_EQ(names.size(), 11u);
  EXPECT_NE(std::find(names.begin(), names.end(), "gpu-0-mig-2g20gb-14-2"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "gpu-0-mig-7g80gb-0-0"), names.end());

  ASSERT_FALSE(MigMode());
  GpuUndo undo = Planned("gpu-0-mig-2g20gb-14-2");
  ASSERT_TRUE(type_->Apply(undo).ok());
  EXPECT_TRUE(MigMode()) << "Prepare turned MIG mode on through NVML";
  auto made = Instances();
  ASSERT_EQ(made.size(), 1u);
  EXPECT_EQ(made[0].placement_start, 2);
  EXPECT_EQ(made[0].placement_size, 2);
  ASSERT_TRUE(undo.Of<MigUndo>().devices[0].gi_id && undo.Of<MigUndo>().devices[0].ci_id);
  EXPECT_EQ(*undo.Of<MigUndo>().devices[0].gi_id, made[0].gi_id);
  EXPECT_EQ(undo.Of<MigUndo>().devices[0].uuid, made[0].uuid);
  // A retry of the planned record takes the device at the placement.
  GpuUndo again = Planned("gpu-0-mig-2g20gb-14-2");
  ASSERT_TRUE(type_->Apply(again).ok());
  EXPECT_EQ(again.Of<MigUndo>().devices[0].uuid, made[0].uuid);
  EXPECT_EQ(Instances().size(), 1u);
  // The full GPU's placement overlaps it: NVML refuses.
  GpuUndo full = Planned("gpu-0-mig-7g80gb-0-0");
  Status s = type_->Apply(full);
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s.ToString();

  // Owned by a record: the sweep keeps it; without one it is destroyed.
  auto kept = type_->SweepOrphans([&]() -> Result<std::vector<GpuUndo>> { return std::vector<GpuUndo>{undo}; });
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(*kept, 0);
  auto swept = type_->SweepOrphans([]() -> Result<std::vector<GpuUndo>> { return std::vector<GpuUndo>{}; },
                                   /*disable_idle_mig_mode=*/true);
  ASSERT_TRUE(swept.ok()) << swept.status().ToString();
  EXPECT_EQ(*swept, 1);
  EXPECT_TRUE(Instances().empty());
  EXPECT_FALSE(MigMode()) << "the start's sweep turns idle MIG mode off";

  // Prepare again and Unprepare from the record: gone, MIG mode off (an H100).
  GpuUndo second = Planned("gpu-0-mig-1g10gb-19-5");
  ASSERT_TRUE(type_->Apply(second).ok());
  ASSERT_EQ(Instances().size(), 1u);
  ASSERT_TRUE(type_->Undo("uid-2", second).ok());
  EXPECT_TRUE(Instances().empty());
  EXPECT_FALSE(MigMode());
  EXPECT_TRUE(type_->Undo("uid-2", second).ok()) << "idempotent";
}

}  // namespace
}  // namespace nvdra::gpu

namespace nvdra::gpu {
namespace {

// Through the engine and the ledger: whatever the scheduler allocated, two
// claims never share a memory slice.
TEST_F(DynamicMigTest, TheLedgerRefusesOverlappingPlacementsAndTheFullGpu) {
  ASSERT_TRUE(cdi_->EnsureRoot().ok());
  auto ledger = driver::testing::OpenTestLedger(dir_);
  ASSERT_TRUE(ledger.ok()) << ledger.status().ToString();
  driver::testing::FakeClaimSource claims;
  auto put = [&](const std::string& uid, const std::string& device) {
    return driver::testing::PutReservedClaim(claims, uid, kDriverName, device);
  };
  driver::EngineOptions eo;
  eo.node_name = "node-1";
  eo.gates = gates_;
  driver::Engine engine(eo, **ledger, *kind_, claims, *cdi_, nullptr);
  const auto far = std::chrono::steady_clock::now() + std::chrono::hours(1);
  auto a = put("uid-a", "gpu-0-mig-3g40gb-9-0");   // slices 0-3
  auto b = put("uid-b", "gpu-0-mig-2g20gb-14-2");  // slices 2-3
  auto full = put("uid-full", "gpu-0");            // all slices
  auto d = put("uid-d", "gpu-0-mig-3g40gb-9-4");   // slices 4-7
  ASSERT_EQ(engine.PrepareClaim(a, far).status().message(), "");
  std::string refused = engine.PrepareClaim(b, far).status().message();
  EXPECT_NE(refused.find("gpu-0 memory-slice-2"), std::string::npos) << refused;
  EXPECT_NE(engine.PrepareClaim(full, far).status().message(), "");
  EXPECT_EQ(Instances(0).size(), 1u) << "nothing created for a refused claim";
  ASSERT_EQ(engine.PrepareClaim(d, far).status().message(), "");
  EXPECT_EQ(Instances(0).size(), 2u);
  ASSERT_EQ(engine.UnprepareClaim(a, far).message(), "");
  EXPECT_NE(engine.PrepareClaim(full, far).status().message(), "") << "gpu-0-mig-3g40gb-9-4 still holds slices 4-7";
  ASSERT_EQ(engine.UnprepareClaim(d, far).message(), "");
  EXPECT_TRUE(Instances(0).empty());
  EXPECT_FALSE(MigMode(0));
  EXPECT_EQ(engine.PrepareClaim(full, far).status().message(), "");
}

}  // namespace
}  // namespace nvdra::gpu
