// TimeSlicingStrategy on its own, over a mock node's GPU control: which
// devices Plan records and at which interval, what Apply programs, how Undo
// resets from the record alone, and how failures come back.
#include "gpu/time_slicing_strategy.h"
#include "gpu/time_slicing_undo.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "devices/device_names.h"
#include "devices/mock/mock_node_fixture.h"
#include "gpu/full_gpu_type.h"
#include "gpu/gpu_device_types.h"
#include "gpu/mig_config.h"
#include "gpu/mps_config.h"
#include "gpu/static_mig_type.h"
#include "gpu/time_slicing_config.h"
#include "gpu/vfio_config.h"
#include "util/file_util.h"

namespace nvdra::gpu {
namespace {

// The node's full GPUs and static MIG devices by name, as the kind hands
// them to a strategy's Plan.
class TimeSlicingDevices final : public GpuDeviceLookup {
 public:
  explicit TimeSlicingDevices(const devices::NodeInventory& inventory) {
    for (auto& d : full_.Devices(inventory)) by_name_[d.name] = d;
    for (auto& d : mig_.Devices(inventory)) by_name_[d.name] = d;
  }
  const GpuDevice* Find(const std::string& name) const override {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &it->second;
  }

 private:
  FullGpuType full_{{StaticMigGpuDecoration()}};
  StaticMigType mig_;
  std::map<std::string, GpuDevice> by_name_;
};

class TimeSlicingStrategyTest : public ::testing::Test {
 protected:
  // a100-mig: gpu-0 and gpu-1 are full GPUs, gpu-2 and gpu-3 are in MIG mode.
  TimeSlicingStrategyTest() : node_("a100-mig"), lookup_(node_.inv) { NewStrategy(); }

  void NewStrategy(int max_attempts = 3) {
    strategy_.reset();
    TimeSliceResetOptions o;
    o.max_attempts = max_attempts;
    resets_ = std::make_unique<TimeSliceResets>(node_.lib->control(), o);
    strategy_ = std::make_unique<TimeSlicingStrategy>(*resets_, node_.inv,
                                                      [this](const std::string& device, const std::string& claim_uid) {
                                                        return shared_.count(device) > 0 && claim_uid == "uid-1";
                                                      });
  }
  static config::ConfigGroup Group(config::Config c, const std::vector<std::string>& devices) {
    config::ConfigGroup g{std::move(c), {}, {}};
    for (const auto& d : devices) g.results.push_back({"gpu", kDriverName, "node-1", d, false, ""});
    return g;
  }
  static GpuConfig TimeSliced(std::optional<std::string> interval) {
    GpuConfig gc;
    gc.sharing = GpuSharing{"TimeSlicing", TimeSlicingConfig{std::move(interval)}, std::nullopt};
    return gc;
  }
  GpuUndo Planned(const config::ConfigGroup& group) {
    GpuUndo undo;
    Status s = strategy_->Plan("uid-1", group, lookup_, undo);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return undo;
  }
  std::string Uuid(int minor) const { return node_.inv.gpus[minor].uuid; }
  std::string MigName(int gpu, int mig) const { return devices::MigDeviceName(node_.inv.gpus[gpu].migs[mig]); }
  std::string ControlLog() const {
    auto log = ReadFileToString(node_.lib->control_log_path());
    return log.ok() ? *log : "";
  }
  void FailControlOf(const std::string& uuid) {
    ASSERT_TRUE(WriteFileAtomically(node_.lib->control_failures_path(), uuid + "\n").ok());
  }
  void HealControl() { ASSERT_TRUE(RemoveFileIfExists(node_.lib->control_failures_path()).ok()); }

  devices::testing::MockNode node_;
  TimeSlicingDevices lookup_;
  std::set<std::string> shared_;  // devices another claim still holds, for uid-1
  std::unique_ptr<TimeSliceResets> resets_;
  std::unique_ptr<TimeSlicingStrategy> strategy_;
};

TEST_F(TimeSlicingStrategyTest, IsNamedAsConfigsNameIt) { EXPECT_EQ(strategy_->name(), "TimeSlicing"); }

TEST_F(TimeSlicingStrategyTest, PlanRecordsEachFullGpuAtTheConfigsIntervalAndTouchesNothing) {
  GpuUndo undo = Planned(Group(TimeSliced("Long"), {"gpu-1", "gpu-0"}));
  EXPECT_EQ(undo.Of<TimeSlicingUndo>().items,
            (std::vector<TimeSliceUndo>{{"gpu-1", Uuid(1), 3, nlohmann::json::object()},
                                        {"gpu-0", Uuid(0), 3, nlohmann::json::object()}}));
  // Only the record: the GPUs are programmed at Apply.
  EXPECT_EQ(ControlLog(), "");
  EXPECT_EQ(Planned(Group(TimeSliced("Short"), {"gpu-0"})).Of<TimeSlicingUndo>().items[0].interval, 1);
  EXPECT_EQ(Planned(Group(TimeSliced("Medium"), {"gpu-0"})).Of<TimeSlicingUndo>().items[0].interval, 2);
  // No interval: the driver's default, 0.
  EXPECT_EQ(Planned(Group(TimeSliced(std::nullopt), {"gpu-0"})).Of<TimeSlicingUndo>().items[0].interval, 0);
}

TEST_F(TimeSlicingStrategyTest, PlanSkipsMigDevicesUnknownDevicesAndOtherConfigs) {
  // MIG devices cannot be time-sliced one by one; an unknown name has no GPU.
  GpuUndo undo = Planned(Group(TimeSliced("Long"), {MigName(2, 0), "gpu-0", "gpu-9"}));
  ASSERT_EQ(undo.Of<TimeSlicingUndo>().items.size(), 1u);
  EXPECT_EQ(undo.Of<TimeSlicingUndo>().items[0].device, "gpu-0");

  MigDeviceConfig mig_config;
  mig_config.sharing = MigDeviceSharing{"TimeSlicing", std::nullopt};
  EXPECT_TRUE(Planned(Group(mig_config, {MigName(2, 0)})).Of<TimeSlicingUndo>().items.empty());
  EXPECT_TRUE(Planned(Group(GpuConfig{}, {"gpu-0"})).Of<TimeSlicingUndo>().items.empty());
  GpuConfig mps;
  mps.sharing = GpuSharing{"MPS", std::nullopt, MpsConfig{}};
  EXPECT_TRUE(Planned(Group(mps, {"gpu-0"})).Of<TimeSlicingUndo>().items.empty());
}

TEST_F(TimeSlicingStrategyTest, ApplySetsComputeModeThenTimeSliceOnEveryRecordedGpu) {
  GpuUndo undo = Planned(Group(TimeSliced("Medium"), {"gpu-0", "gpu-1"}));
  ASSERT_TRUE(strategy_->Apply(undo).ok());
  const std::string once = "SetComputeMode " + Uuid(0) + " DEFAULT\nSetTimeSlice " + Uuid(0) + " 2\n" +
                           "SetComputeMode " + Uuid(1) + " DEFAULT\nSetTimeSlice " + Uuid(1) + " 2\n";
  EXPECT_EQ(ControlLog(), once);
  // Again after a crash: the same settings again.
  ASSERT_TRUE(strategy_->Apply(undo).ok());
  EXPECT_EQ(ControlLog(), once + once);
}

TEST_F(TimeSlicingStrategyTest, ApplyStopsAtAGpuThatFailsWithItsError) {
  GpuUndo undo = Planned(Group(TimeSliced("Long"), {"gpu-0", "gpu-1"}));
  FailControlOf(Uuid(0));
  Status s = strategy_->Apply(undo);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.message().starts_with("error applying config: ")) << s.ToString();
  EXPECT_NE(s.message().find(Uuid(0)), std::string::npos) << s.ToString();
  EXPECT_EQ(ControlLog(), "");
  HealControl();
  EXPECT_TRUE(strategy_->Apply(undo).ok());
}

TEST_F(TimeSlicingStrategyTest, UndoResetsEveryRecordedGpuFromTheRecordAlone) {
  // A record as the ledger keeps it; no Plan or Apply in this process.
  GpuUndo undo;
  undo.Get<TimeSlicingUndo>().items = {{"gpu-0", Uuid(0), 3, nlohmann::json::object()},
                                       {"gpu-1", Uuid(1), 1, nlohmann::json::object()}};
  ASSERT_TRUE(strategy_->Undo("uid-1", undo).ok());
  EXPECT_EQ(ControlLog(), "SetTimeSlice " + Uuid(0) + " 0\nSetTimeSlice " + Uuid(1) + " 0\n");
  EXPECT_TRUE(resets_->OwingDevices().empty());
}

TEST_F(TimeSlicingStrategyTest, UndoLeavesGpusOthersShareOrThatAreGone) {
  GpuUndo undo;
  undo.Get<TimeSlicingUndo>().items = {{"gpu-0", Uuid(0), 3, nlohmann::json::object()},
                                       {"gpu-1", Uuid(1), 3, nlohmann::json::object()},
                                       {"gpu-7", "GPU-no-longer-here", 3, nlohmann::json::object()}};
  undo.Get<TimeSlicingUndo>().unreadable = {nlohmann::json{{"fromANewerVersion", true}}};
  shared_ = {"gpu-0"};
  ASSERT_TRUE(strategy_->Undo("uid-1", undo).ok());
  // gpu-0's other sharer resets it; the GPU that left the node has nothing
  // to reset; the item this version cannot read is skipped.
  EXPECT_EQ(ControlLog(), "SetTimeSlice " + Uuid(1) + " 0\n");
  // The last sharer resets it.
  ASSERT_TRUE(strategy_->Undo("uid-2", undo).ok());
  EXPECT_EQ(ControlLog(),
            "SetTimeSlice " + Uuid(1) + " 0\nSetTimeSlice " + Uuid(0) + " 0\nSetTimeSlice " + Uuid(1) + " 0\n");
}

TEST_F(TimeSlicingStrategyTest, UndoTriesEveryGpuAndAnswersTheFirstFailure) {
  GpuUndo undo;
  undo.Get<TimeSlicingUndo>().items = {{"gpu-0", Uuid(0), 3, nlohmann::json::object()},
                                       {"gpu-1", Uuid(1), 3, nlohmann::json::object()}};
  FailControlOf(Uuid(0));
  Status s = strategy_->Undo("uid-1", undo);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(Uuid(0)), std::string::npos) << s.ToString();
  // gpu-1 was reset even though gpu-0 failed before it.
  EXPECT_EQ(ControlLog(), "SetTimeSlice " + Uuid(1) + " 0\n");
  EXPECT_TRUE(resets_->OwingDevices().empty());
}

TEST_F(TimeSlicingStrategyTest, UndoReleasesTheClaimAfterItsAttemptsAndTheGpuOwesTheReset) {
  NewStrategy(/*max_attempts=*/2);
  GpuUndo undo;
  undo.Get<TimeSlicingUndo>().items = {{"gpu-1", Uuid(1), 3, nlohmann::json::object()}};
  FailControlOf(Uuid(1));
  EXPECT_FALSE(strategy_->Undo("uid-3", undo).ok());
  EXPECT_TRUE(resets_->OwingDevices().empty());
  // The second failure uses up the claim's attempts: Unprepare succeeds and
  // the GPU owes the reset from then on.
  EXPECT_TRUE(strategy_->Undo("uid-3", undo).ok());
  EXPECT_EQ(resets_->OwingDevices(), std::vector<std::string>{"gpu-1"});
  EXPECT_EQ(ControlLog(), "");
  // A new claim's Apply settles what the GPU owed.
  HealControl();
  ASSERT_TRUE(strategy_->Apply(Planned(Group(TimeSliced("Short"), {"gpu-1"}))).ok());
  EXPECT_TRUE(resets_->OwingDevices().empty());
}

}  // namespace
}  // namespace nvdra::gpu
