#include "gpu/gpu_kind.h"

#include <gtest/gtest.h>

#include "util/test_temp_dir.h"


#include "devices/device_lib.h"
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
    kind_ = std::make_unique<GpuKind>(inventory_, devices::DeviceEdits::ForLib(*lib_), lib_->control(), *cdi_);
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
  auto p = kind_->Prepare(w, *plan, nullptr);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->devices.size(), 2u);
  EXPECT_EQ(p->devices[0].cdi_device_ids, std::vector<std::string>{"k8s.gpu.nvidia.com/claim=uid-1-gpu-1"});
  ASSERT_EQ(p->spec.devices.size(), 2u);
  std::string json = cdi::RenderJson(p->spec);
  EXPECT_NE(json.find("/dev/nvidia1"), std::string::npos);
  EXPECT_NE(json.find("/dev/nvidia3"), std::string::npos);
  EXPECT_NE(json.find("/dev/nvidiactl"), std::string::npos);
  EXPECT_EQ(json.find("/dev/nvidia2\""), std::string::npos);

  // The spec rebuilt from the ledger entry is byte-identical.
  ledger::ClaimEntry e;
  e.uid = "uid-1";
  e.prepared = p->devices;
  e.undo = p->undo;
  auto again = kind_->RebuildSpec(e);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(cdi::RenderJson(*again), json);
}

TEST_F(GpuKindTest, TimeSlicingIsAppliedAndResetFromTheUndoRecord) {
  Open("h100x8");
  auto w = Work({"gpu-2"});
  config::GpuConfig gc;
  gc.sharing = config::GpuSharing{"TimeSlicing", config::TimeSlicingConfig{"Medium"}, std::nullopt};
  w.groups.push_back({gc, {}, {{"gpu", "gpu-2", "gpu", kDriverName}}});
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto p = kind_->Prepare(w, *plan, nullptr);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const std::string uuid = inventory_.gpus[2].uuid;
  EXPECT_EQ(ControlLog(), "SetComputeMode " + uuid + " DEFAULT\nSetTimeSlice " + uuid + " 2\n");
  ledger::ClaimEntry e;
  e.uid = "uid-1";
  e.undo = p->undo;
  ASSERT_TRUE(kind_->Unprepare(e).ok());
  EXPECT_EQ(ControlLog(), "SetComputeMode " + uuid + " DEFAULT\nSetTimeSlice " + uuid + " 2\nSetTimeSlice " +
                              uuid + " 0\n");
}

TEST_F(GpuKindTest, UnprepareToleratesRecordsItDoesNotUnderstand) {
  Open("h100x8");
  ledger::ClaimEntry e;
  e.uid = "uid-1";
  e.undo = nlohmann::json::parse(R"({"version": 99, "timeSlicing": [42, {"uuid": "GPU-gone"}], "future": {}})");
  EXPECT_TRUE(kind_->Unprepare(e).ok());
  e.undo = "not an object";
  EXPECT_TRUE(kind_->Unprepare(e).ok());
  EXPECT_EQ(ControlLog(), "");
}

TEST_F(GpuKindTest, MpsIsRefusedClearly) {
  Open("h100x8");
  auto w = Work({"gpu-0"});
  config::GpuConfig gc;
  gc.sharing = config::GpuSharing{"MPS", std::nullopt, config::MpsConfig{}};
  w.groups.push_back({gc, {}, {{"gpu", "gpu-0", "gpu", kDriverName}}});
  auto plan = kind_->Plan(w);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("MPS"), std::string::npos);
}

}  // namespace
}  // namespace nvdra::gpu
