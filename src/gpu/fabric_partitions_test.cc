#include "gpu/fabric_partitions.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "devices/backends/open_device_lib.h"
#include "gpu/gpu_kind.h"
#include "gpu/gpu_test_util.h"
#include "util/failpoint.h"
#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::gpu {
namespace {

using nlohmann::json;

// On the h100x8 mock (an HGX board: module ids 1..8 on gpu-0..gpu-7, and
// Fabric Manager's partitions of 8, 4, 2 and 1 GPUs, ids 0..14) with
// FabricManagerPartitioning.
class FabricPartitionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path();
    Status opened = testing::OpenMockNode("h100x8", dir_, lib_, inventory_);
    ASSERT_TRUE(opened.ok()) << opened.ToString();
    auto gates = config::FeatureGates::Parse("FabricManagerPartitioning=true");
    ASSERT_TRUE(gates.ok());
    gates_ = *gates;
    kind_ = NewKind(gates_, true);
  }
  void TearDown() override { FailPoints::Process().Clear(); }

  std::unique_ptr<GpuKind> NewKind(const config::FeatureGates& gates, bool with_fabric,
                                   DeviceSharedWithOthers shared = nullptr) {
    GpuKindOptions ko;
    ko.gates = gates;
    if (shared) {
      auto shares = ParseConsumableShares("memory", gates);
      EXPECT_TRUE(shares.ok()) << shares.status().ToString();
      ko.consumable_shares = *shares;
      ko.shared_with_others = std::move(shared);
    }
    ko.resets.state_path = dir_ + "/time-slice-resets-" + std::to_string(++kinds_) + ".json";
    if (with_fabric) {
      auto fm = lib_->OpenFabricManager();
      EXPECT_TRUE(fm.ok() && *fm != nullptr);
      auto fabric = FabricPartitions::Open(std::move(fm).value());
      EXPECT_TRUE(fabric.ok()) << fabric.status().ToString();
      ko.fabric = std::move(fabric).value();
    }
    return std::make_unique<GpuKind>(inventory_, GpuContainerEdits(devices::ContainerSources::ForLib(*lib_)),
                                     lib_->control(), ko);
  }
  driver::ClaimWork Work(const std::string& uid, const std::vector<std::string>& devices, bool admin = false) {
    driver::ClaimWork w{uid, "default", "c-" + uid, {}, {}};
    for (const auto& d : devices) w.results.push_back({"gpus", kDriverName, "node-1", d, admin, ""});
    w.groups.push_back({GpuConfig{}, {}, w.results});
    return w;
  }
  // The mock Fabric Manager's active partitions and its log of changes.
  std::vector<int> Active() {
    auto text = ReadFileToString(dir_ + "/mock/state/fabric-manager.json");
    if (!text.ok()) return {};
    return json::parse(*text)["active"].get<std::vector<int>>();
  }
  std::string Log() {
    auto text = ReadFileToString(dir_ + "/mock/state/fabric-manager.log");
    return text.ok() ? *text : "";
  }
  const model::PublishedDevice* Published(const std::vector<model::PublishedDevice>& devs, const std::string& name) {
    for (const auto& d : devs) {
      if (d.name == name) return &d;
    }
    return nullptr;
  }

  ::nvdra::testing::TempDir tmp_{"nvdra-fabric"};
  std::string dir_;
  int kinds_ = 0;
  std::unique_ptr<devices::DeviceLib> lib_;
  devices::NodeInventory inventory_;
  config::FeatureGates gates_;
  std::unique_ptr<GpuKind> kind_;
};

TEST_F(FabricPartitionsTest, FullGpusPublishTheirModuleIdAndPartitionOfEachSize) {
  auto devs = kind_->PublishedDevices();
  const model::PublishedDevice* gpu0 = Published(devs, "gpu-0");
  ASSERT_NE(gpu0, nullptr);
  EXPECT_EQ(std::get<int64_t>(gpu0->attributes.at("gpuModuleID")), 1);
  EXPECT_EQ(std::get<int64_t>(gpu0->attributes.at("partition1")), 7);
  EXPECT_EQ(std::get<int64_t>(gpu0->attributes.at("partition2")), 3);
  EXPECT_EQ(std::get<int64_t>(gpu0->attributes.at("partition4")), 1);
  EXPECT_EQ(std::get<int64_t>(gpu0->attributes.at("partition8")), 0);
  const model::PublishedDevice* gpu7 = Published(devs, "gpu-7");
  ASSERT_NE(gpu7, nullptr);
  EXPECT_EQ(std::get<int64_t>(gpu7->attributes.at("gpuModuleID")), 8);
  EXPECT_EQ(std::get<int64_t>(gpu7->attributes.at("partition2")), 6);
  EXPECT_EQ(std::get<int64_t>(gpu7->attributes.at("partition4")), 2);

  // With the gate on but no Fabric Manager: the module id alone, as upstream.
  auto no_fm = NewKind(gates_, false)->PublishedDevices();
  EXPECT_EQ(std::get<int64_t>(Published(no_fm, "gpu-0")->attributes.at("gpuModuleID")), 1);
  EXPECT_FALSE(Published(no_fm, "gpu-0")->attributes.count("partition2"));
  // Without the gate: neither.
  auto off = NewKind(config::FeatureGates(), false)->PublishedDevices();
  EXPECT_FALSE(Published(off, "gpu-0")->attributes.count("gpuModuleID"));
}

TEST_F(FabricPartitionsTest, PassthroughGpusPublishThemToo) {
  auto gates = config::FeatureGates::Parse("FabricManagerPartitioning=true,PassthroughSupport=true");
  ASSERT_TRUE(gates.ok());
  auto devs = NewKind(*gates, true)->PublishedDevices();
  const model::PublishedDevice* twin = Published(devs, "gpu-vfio-0");
  ASSERT_NE(twin, nullptr);
  EXPECT_EQ(std::get<int64_t>(twin->attributes.at("gpuModuleID")), 1);
  EXPECT_EQ(std::get<int64_t>(twin->attributes.at("partition2")), 3);
}

TEST_F(FabricPartitionsTest, PrepareActivatesThePartitionOfExactlyTheClaimsGpusAndUnprepareDeactivatesIt) {
  // In the claim's order, and a device serving two requests counts once.
  driver::ClaimWork w = Work("uid-a", {"gpu-1", "gpu-0"});
  w.results.push_back({"again", kDriverName, "node-1", "gpu-1", false, ""});
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  // Recorded before anything changed.
  EXPECT_EQ(plan->undo["fabricPartition"], json::parse(R"({"id": 3, "gpuModuleIDs": [2, 1]})"));
  EXPECT_EQ(Active(), std::vector<int>{});
  auto prepared = kind_->Prepare(w, *plan);
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  EXPECT_EQ(Active(), std::vector<int>{3});
  EXPECT_EQ(prepared->undo["fabricPartition"]["id"], 3);
  // A repeated Prepare finds it active and leaves it.
  ASSERT_TRUE(kind_->Prepare(w, *plan).ok());
  EXPECT_EQ(Log(), "activate 3\n");

  ASSERT_TRUE(kind_->Unprepare("uid-a", prepared->undo).ok());
  EXPECT_EQ(Active(), std::vector<int>{});
  EXPECT_EQ(Log(), "activate 3\ndeactivate 3\n");
  // Unprepare again: nothing to do.
  ASSERT_TRUE(kind_->Unprepare("uid-a", prepared->undo).ok());
  EXPECT_EQ(Log(), "activate 3\ndeactivate 3\n");
}

TEST_F(FabricPartitionsTest, ASetThatMatchesNoPartitionIsRefusedInUpstreamsWords) {
  auto plan = kind_->Plan(Work("uid-b", {"gpu-0", "gpu-2"}));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(plan.status().message(),
            "fabric manager: GPU module set [1 3] does not match any FM partition; refusing partition activation");
  // Three GPUs: no partition has three.
  auto three = kind_->Plan(Work("uid-c", {"gpu-0", "gpu-1", "gpu-2"}));
  ASSERT_FALSE(three.ok());
  EXPECT_NE(three.status().message().find("GPU module set [1 2 3] does not match"), std::string::npos);
  EXPECT_EQ(Log(), "");
  // The whole board matches partition 0; one GPU its own.
  auto all = kind_->Plan(Work("uid-d", {"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7"}));
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(all->undo["fabricPartition"]["id"], 0);
  auto one = kind_->Plan(Work("uid-e", {"gpu-5"}));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->undo["fabricPartition"]["id"], 12);
}

TEST_F(FabricPartitionsTest, AGpuWithoutModuleIdIsRefused) {
  devices::GpuInfo g = inventory_.gpus[0];
  g.module_id.reset();
  auto fm = lib_->OpenFabricManager();
  ASSERT_TRUE(fm.ok());
  auto fabric = FabricPartitions::Open(std::move(fm).value());
  ASSERT_TRUE(fabric.ok());
  auto m = (*fabric)->Match({&g});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(),
            "fabric manager: no gpuModuleID for GPU at PCI \"" + g.pci_bus_id + "\"; refusing partition activation");
}

TEST_F(FabricPartitionsTest, AdminAccessAndClaimsWithoutFullGpusTouchNoPartition) {
  auto admin = kind_->Plan(Work("uid-admin", {"gpu-0", "gpu-2"}, true));
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  EXPECT_FALSE(admin->undo.contains("fabricPartition"));
  auto prepared = kind_->Prepare(Work("uid-admin", {"gpu-0", "gpu-2"}, true), *admin);
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  ASSERT_TRUE(kind_->Unprepare("uid-admin", prepared->undo).ok());
  EXPECT_EQ(Log(), "");
}

TEST_F(FabricPartitionsTest, AFailureAfterActivationLeavesARecordThatDeactivates) {
  driver::ClaimWork w = Work("uid-f", {"gpu-2", "gpu-3"});
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok());
  ASSERT_TRUE(FailPoints::Process().Load("fabric-partition-after-activate=error").ok());
  ASSERT_FALSE(kind_->Prepare(w, *plan).ok());
  FailPoints::Process().Clear();
  EXPECT_EQ(Active(), std::vector<int>{4});
  // The record written at Plan is all Unprepare has.
  ASSERT_TRUE(kind_->Unprepare("uid-f", plan->undo).ok());
  EXPECT_EQ(Active(), std::vector<int>{});
}

TEST_F(FabricPartitionsTest, AFabricManagerFailureFailsThePrepareWithItsReason) {
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/mock/fabric-manager-failures", "activate 3\n").ok());
  driver::ClaimWork w = Work("uid-g", {"gpu-0", "gpu-1"});
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok());
  auto prepared = kind_->Prepare(w, *plan);
  ASSERT_FALSE(prepared.ok());
  EXPECT_EQ(
      prepared.status().message().rfind("activating fabric partition 3: fabricmanager: fmActivateFabricPartition(3): "
                                        "fmActivateFabricPartition: GENERIC_ERROR",
                                        0),
      0u)
      << prepared.status().message();
  EXPECT_EQ(Active(), std::vector<int>{});
  // Unprepare of the failed claim: nothing active, nothing to do.
  EXPECT_TRUE(kind_->Unprepare("uid-g", plan->undo).ok());
}

TEST_F(FabricPartitionsTest, SweepDeactivatesOnlyPartitionsNoRecordNames) {
  driver::ClaimWork kept = Work("uid-k", {"gpu-4", "gpu-5"});
  auto kept_plan = kind_->Plan(kept);
  ASSERT_TRUE(kept_plan.ok());
  ASSERT_TRUE(kind_->Prepare(kept, *kept_plan).ok());
  driver::ClaimWork gone = Work("uid-x", {"gpu-6", "gpu-7"});
  auto gone_plan = kind_->Plan(gone);
  ASSERT_TRUE(gone_plan.ok());
  ASSERT_TRUE(kind_->Prepare(gone, *gone_plan).ok());
  EXPECT_EQ(Active(), (std::vector<int>{5, 6}));
  // Only uid-k's record is left (uid-x's was lost), and one this version
  // cannot otherwise read still owns the partition it names.
  json newer = {{"version", 9}, {"devices", "not a list"}, {"fabricPartition", {{"id", 5}}}};
  int asked = 0;
  auto swept = kind_->SweepOrphans([&]() -> Result<std::vector<HeldRecord>> {
    ++asked;
    return std::vector<HeldRecord>{newer};
  });
  ASSERT_TRUE(swept.ok()) << swept.status().ToString();
  EXPECT_EQ(*swept, 1);
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(Active(), std::vector<int>{5});
  // A claim imported from the Go driver's checkpoint (or rebuilt from its
  // CDI spec) names no partition but may hold one: nothing is swept while
  // it lives. A tombstone's null record holds nothing.
  ASSERT_TRUE(kind_->Prepare(gone, *gone_plan).ok());
  for (const HeldRecord& foreign :
       {HeldRecord(json{{"version", 1}, {"devices", json::array()}}, ledger::ClaimOrigin::kLegacyCheckpoint),
        HeldRecord(json{{"version", 1}, {"devices", {"gpu-2"}}}, ledger::ClaimOrigin::kRebuilt)}) {
    auto kept_by_import = kind_->SweepOrphans([&]() -> Result<std::vector<HeldRecord>> {
      return std::vector<HeldRecord>{kept_plan->undo, foreign, json()};
    });
    ASSERT_TRUE(kept_by_import.ok());
    EXPECT_EQ(*kept_by_import, 0) << foreign.undo.dump();
    EXPECT_EQ(Active(), (std::vector<int>{5, 6}));
  }
  auto tombstone = kind_->SweepOrphans([&]() -> Result<std::vector<HeldRecord>> {
    return std::vector<HeldRecord>{kept_plan->undo, json()};
  });
  ASSERT_TRUE(tombstone.ok());
  EXPECT_EQ(*tombstone, 1);
  EXPECT_EQ(Active(), std::vector<int>{5});
  asked = 0;
  // Once nothing is active, the sweep does not even read the records.
  ASSERT_TRUE(kind_->Unprepare("uid-k", kept_plan->undo).ok());
  auto none = kind_->SweepOrphans([&]() -> Result<std::vector<HeldRecord>> {
    ++asked;
    return std::vector<HeldRecord>{};
  });
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 0);
  EXPECT_EQ(asked, 0);
}

TEST_F(FabricPartitionsTest, ActivationOutlivesThePluginAndAKindWithoutTheGateLeavesIt) {
  driver::ClaimWork w = Work("uid-r", {"gpu-0"});
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok());
  auto prepared = kind_->Prepare(w, *plan);
  ASSERT_TRUE(prepared.ok());
  kind_.reset();
  // A new plugin on the same node sees the partition active and owned.
  auto again = NewKind(gates_, true);
  auto swept = again->SweepOrphans([&]() -> Result<std::vector<HeldRecord>> {
    return std::vector<HeldRecord>{prepared->undo};
  });
  ASSERT_TRUE(swept.ok());
  EXPECT_EQ(*swept, 0);
  EXPECT_EQ(Active(), std::vector<int>{7});
  // Without the gate, Unprepare succeeds and leaves Fabric Manager alone.
  auto off = NewKind(config::FeatureGates(), false);
  EXPECT_TRUE(off->Unprepare("uid-r", prepared->undo).ok());
  EXPECT_EQ(Active(), std::vector<int>{7});
  EXPECT_TRUE(again->Unprepare("uid-r", prepared->undo).ok());
  EXPECT_EQ(Active(), std::vector<int>{});
}

TEST_F(FabricPartitionsTest, WithConsumableSharesThePartitionStaysWhileAnotherClaimSharesItsGpus) {
  auto gates = config::FeatureGates::Parse("FabricManagerPartitioning=true,ConsumableShares=true");
  ASSERT_TRUE(gates.ok());
  std::string sharer = "uid-2";  // the claim still holding a share of gpu-0, or none
  auto kind = NewKind(*gates, true, [&](const std::string& device, const std::string& claim_uid) {
    return !sharer.empty() && claim_uid != sharer && device == "gpu-0";
  });
  driver::ClaimWork a = Work("uid-1", {"gpu-0", "gpu-1"}), b = Work("uid-2", {"gpu-0", "gpu-1"});
  auto pa = kind->Plan(a), pb = kind->Plan(b);
  ASSERT_TRUE(pa.ok() && pb.ok());
  ASSERT_TRUE(kind->Prepare(a, *pa).ok());
  ASSERT_TRUE(kind->Prepare(b, *pb).ok()) << "the second sharer finds the partition active";
  EXPECT_EQ(Log(), "activate 3\n");
  ASSERT_TRUE(kind->Unprepare("uid-1", pa->undo).ok());
  EXPECT_EQ(Active(), std::vector<int>{3}) << "uid-2 still shares gpu-0";
  sharer.clear();
  ASSERT_TRUE(kind->Unprepare("uid-2", pb->undo).ok());
  EXPECT_EQ(Active(), std::vector<int>{});
}

TEST(FabricPartitionUndoTest, RoundTripsAndKeepsWhatItCannotRead) {
  GpuUndo u;
  u.devices = {"gpu-0", "gpu-1"};
  u.Get<FabricUndo>().partition = FabricPartitionUndo{3, {1, 2}, json::object()};
  json j = EncodeGpuUndo(u);
  EXPECT_EQ(j["fabricPartition"], json::parse(R"({"id": 3, "gpuModuleIDs": [1, 2]})"));
  auto back = DecodeGpuUndo(j);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, u);
  // A newer version's field inside survives; a shape this one cannot read
  // is kept verbatim and read as no partition.
  j["fabricPartition"]["vfs"] = json::array({1});
  back = DecodeGpuUndo(j);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(EncodeGpuUndo(*back), j);
  json odd = {{"version", 1}, {"devices", json::array()}, {"fabricPartition", "3"}};
  back = DecodeGpuUndo(odd);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->Find<FabricUndo>(), nullptr);
  EXPECT_EQ(EncodeGpuUndo(*back)["fabricPartition"], "3");
  // Older records have none.
  back = DecodeGpuUndo(json{{"version", 1}, {"devices", {"gpu-0"}}});
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->Find<FabricUndo>(), nullptr);
  EXPECT_FALSE(EncodeGpuUndo(*back).contains("fabricPartition"));
}

}  // namespace
}  // namespace nvdra::gpu
