#include "gpu/gpu_kind.h"

#include <gtest/gtest.h>

#include "util/test_temp_dir.h"


#include "devices/device_lib.h"
#include "driver/engine.h"
#include "util/file_util.h"

namespace nvdra::gpu {
namespace {

class GpuKindTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path();
  }
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
    kind_ = std::make_unique<GpuKind>(inventory_, devices::DeviceEdits::ForLib(*lib_), lib_->control());
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
  config::GpuConfig gc;
  gc.sharing = config::GpuSharing{"TimeSlicing", config::TimeSlicingConfig{"Medium"}, std::nullopt};
  w.groups.push_back({gc, {}, {{"gpu", kDriverName, "node-1", "gpu-2", false, ""}}});
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto p = kind_->Prepare(w, *plan);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const std::string uuid = inventory_.gpus[2].uuid;
  EXPECT_EQ(ControlLog(), "SetComputeMode " + uuid + " DEFAULT\nSetTimeSlice " + uuid + " 2\n");
  ASSERT_TRUE(kind_->Unprepare("uid-1", p->undo).ok());
  EXPECT_EQ(ControlLog(), "SetComputeMode " + uuid + " DEFAULT\nSetTimeSlice " + uuid + " 2\nSetTimeSlice " +
                              uuid + " 0\n");
}

TEST_F(GpuKindTest, UnprepareToleratesRecordsItDoesNotUnderstand) {
  Open("h100x8");
  auto undo = nlohmann::json::parse(R"({"version": 99, "timeSlicing": [42, {"uuid": "GPU-gone"}], "future": {}})");
  EXPECT_TRUE(kind_->Unprepare("uid-1", undo).ok());
  EXPECT_TRUE(kind_->Unprepare("uid-1", "not an object").ok());
  EXPECT_EQ(ControlLog(), "");
}

TEST_F(GpuKindTest, MpsIsRefusedClearly) {
  Open("h100x8");
  auto w = Work({"gpu-0"});
  config::GpuConfig gc;
  gc.sharing = config::GpuSharing{"MPS", std::nullopt, config::MpsConfig{}};
  w.groups.push_back({gc, {}, {{"gpu", kDriverName, "node-1", "gpu-0", false, ""}}});
  auto plan = kind_->Plan(w);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("MPS"), std::string::npos);
}

}  // namespace
}  // namespace nvdra::gpu
