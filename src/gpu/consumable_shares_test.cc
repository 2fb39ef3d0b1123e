// Consumable shares: the flag, the devices as upstream publishes them in each
// mode, and claims sharing a GPU through the engine and the real ledger.
#include "gpu/consumable_shares.h"

#include <gtest/gtest.h>

#include "devices/backends/open_device_lib.h"
#include "driver/engine.h"
#include "driver/engine_test_util.h"
#include "gpu/gpu_checkpoint_codec.h"
#include "gpu/gpu_kind.h"
#include "kube/slice_builder.h"
#include "util/failpoint.h"
#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::gpu {
namespace {

using nlohmann::json;

const config::FeatureGates kGateOn = config::FeatureGates().With(config::Gate::kConsumableShares, true);

TEST(ConsumableSharesTest, FlagValuesAndUpstreamErrors) {
  EXPECT_EQ(*ParseConsumableShares("disabled", config::FeatureGates()), ConsumableShares{});
  EXPECT_EQ(*ParseConsumableShares("disabled", kGateOn), ConsumableShares{});
  EXPECT_EQ(ParseConsumableShares("memory", kGateOn)->mode, ConsumableSharesMode::kMemory);
  EXPECT_EQ(ParseConsumableShares("unlimited", kGateOn)->mode, ConsumableSharesMode::kUnlimited);
  EXPECT_EQ(*ParseConsumableShares("4", kGateOn), (ConsumableShares{ConsumableSharesMode::kCount, 4}));
  EXPECT_TRUE(ParseConsumableShares("memory", kGateOn)->enabled());
  EXPECT_FALSE(ParseConsumableShares("disabled", kGateOn)->enabled());
  // The gate is checked first, whatever the value, as upstream.
  for (const char* v : {"memory", "unlimited", "4", "bogus"}) {
    EXPECT_EQ(ParseConsumableShares(v, config::FeatureGates()).status().message(),
              "--consumable-shares requires feature gate ConsumableShares to be enabled")
        << v;
  }
  for (const char* v : {"0", "-3", "bogus", "", " memory", "4.5", "99999999999999999999"}) {
    auto r = ParseConsumableShares(v, kGateOn);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << v;
    EXPECT_EQ(r.status().message(), "invalid value for --consumable-shares: \"" + std::string(v) +
                                        "\" (must be 'disabled', 'memory', 'unlimited', or a positive integer)");
  }
}

TEST(ConsumableSharesTest, UnalignedMemoryIsRoundedDownToTheStep) {
  model::PublishedDevice d;
  d.capacity["memory"] = std::to_string(1048576 * 10 + 500);
  ApplyConsumableShares(d, {ConsumableSharesMode::kUnlimited, 0});
  EXPECT_TRUE(d.allow_multiple_allocations);
  EXPECT_EQ(d.capacity.at("memory"), "10Mi");
  EXPECT_EQ(d.capacity_policies.at("memory"), (model::CapacityRequestPolicy{"0", "0", "10Mi", "1Mi"}));
  // No memory: shared without capacity policies, as upstream.
  model::PublishedDevice bare;
  ApplyConsumableShares(bare, {ConsumableSharesMode::kCount, 4});
  EXPECT_TRUE(bare.allow_multiple_allocations);
  EXPECT_TRUE(bare.capacity.empty());
  // Disabled: untouched.
  model::PublishedDevice off;
  off.capacity["memory"] = "85520809984";
  ApplyConsumableShares(off, {});
  EXPECT_FALSE(off.allow_multiple_allocations);
  EXPECT_EQ(off.capacity.at("memory"), "85520809984");
  EXPECT_TRUE(off.capacity_policies.empty());
}

class ConsumableSharesKindTest : public ::testing::Test {
 protected:
  void Open(const std::string& profile, ConsumableShares shares) {
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
    ASSERT_TRUE(cdi_->EnsureRoot().ok());
    ASSERT_TRUE(MakeDirectories(dir_ + "/plugin").ok());
    ledger::LedgerOptions lo;
    lo.dir = dir_ + "/plugin";
    lo.boot_id = "boot-1";
    lo.codec = &codec_;
    auto ledger = ledger::ClaimLedger::Open(lo);
    ASSERT_TRUE(ledger.ok()) << ledger.status().ToString();
    ledger_ = std::move(ledger).value();
    GpuKindOptions ko;
    ko.gates = kGateOn;
    ko.consumable_shares = shares;
    ko.shared_with_others = SharedWithOthersIn(*ledger_);
    ko.resets.state_path = dir_ + "/time-slice-resets.json";
    kind_ = std::make_unique<GpuKind>(inventory_, GpuContainerEdits(devices::ContainerSources::ForLib(*lib_)),
                                      lib_->control(), ko);
    driver::EngineOptions eo;
    eo.node_name = "node-1";
    auto gates = config::FeatureGates::Parse("ConsumableShares=true,TimeSlicingSettings=true");
    ASSERT_TRUE(gates.ok());
    eo.gates = *gates;
    engine_ = std::make_unique<driver::Engine>(eo, *ledger_, *kind_, claims_, *cdi_, nullptr);
  }
  void TearDown() override {
    engine_.reset();
    kind_.reset();
    ledger_.reset();
    lib_.reset();
  }
  json Published(const std::string& name) {
    for (const auto& d : kind_->PublishedDevices()) {
      if (d.name == name) return kube::EncodeDevice(d, "v1");
    }
    return nullptr;
  }
  // A claim the scheduler gave a share of `device`, consuming `consumed`.
  model::ClaimRef Share(const std::string& uid, const std::string& device,
                        std::map<std::string, std::string> consumed, const std::string& interval = "") {
    driver::ClaimSnapshot c;
    c.uid = uid;
    c.ns = "default";
    c.name = "claim-" + uid.substr(uid.size() - 4);
    c.allocated = true;
    model::AllocationResult r{"gpu", kDriverName, "node-1", device, false, "share-" + uid};
    r.consumed_capacity = std::move(consumed);
    c.results = {r};
    if (!interval.empty()) {
      config::ClaimConfig cc;
      cc.requests = {"gpu"};
      cc.driver = kDriverName;
      cc.parameters_json = R"({"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig",)"
                           R"("sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":")" +
                           interval + R"("}}})";
      c.configs = {cc};
    }
    c.consumers = {"pod-" + uid};
    claims_.Put(c);
    return {c.ns, c.uid, c.name};
  }
  std::string ControlLog() {
    auto s = ReadFileToString(dir_ + "/mock/state/control.log");
    return s.ok() ? *s : "";
  }

  const std::chrono::steady_clock::time_point far_ = std::chrono::steady_clock::now() + std::chrono::hours(1);
  ::nvdra::testing::TempDir tmp_{"nvdra-shares"};
  std::string dir_ = tmp_.path();
  std::unique_ptr<devices::DeviceLib> lib_;
  devices::NodeInventory inventory_;
  std::unique_ptr<cdi::CdiSpecWriter> cdi_;
  GpuCheckpointCodec codec_;
  std::unique_ptr<ledger::ClaimLedger> ledger_;
  driver::testing::FakeClaimSource claims_;
  std::unique_ptr<GpuKind> kind_;
  std::unique_ptr<driver::Engine> engine_;
};

// The H100's 85520809984 bytes are exactly 81559Mi.
TEST_F(ConsumableSharesKindTest, MemoryModeIsPublishedAsUpstream) {
  Open("h100x8", {ConsumableSharesMode::kMemory, 0});
  json d = Published("gpu-0");
  EXPECT_EQ(d["allowMultipleAllocations"], true);
  EXPECT_EQ(d["capacity"], json::parse(R"({"memory": {"value": "81559Mi", "requestPolicy": {"default": "81559Mi",
            "validRange": {"min": "1Mi", "max": "81559Mi", "step": "1Mi"}}}})"));
}

TEST_F(ConsumableSharesKindTest, UnlimitedModeIsPublishedAsUpstream) {
  Open("h100x8", {ConsumableSharesMode::kUnlimited, 0});
  json d = Published("gpu-3");
  EXPECT_EQ(d["allowMultipleAllocations"], true);
  EXPECT_EQ(d["capacity"], json::parse(R"({"memory": {"value": "81559Mi", "requestPolicy": {"default": "0",
            "validRange": {"min": "0", "max": "81559Mi", "step": "1Mi"}}}})"));
}

TEST_F(ConsumableSharesKindTest, ShareCountModeIsPublishedAsUpstream) {
  Open("h100x8", {ConsumableSharesMode::kCount, 4});
  json d = Published("gpu-0");
  EXPECT_EQ(d["allowMultipleAllocations"], true);
  EXPECT_EQ(d["capacity"], json::parse(R"({
    "memory": {"value": "81559Mi", "requestPolicy": {"default": "0", "validRange": {"min": "0", "max": "81559Mi", "step": "1Mi"}}},
    "shares": {"value": "4", "requestPolicy": {"default": "1", "validRange": {"min": "1", "max": "4", "step": "1"}}}})"));
}

TEST_F(ConsumableSharesKindTest, DisabledPublishesAsBefore) {
  Open("h100x8", {});
  json d = Published("gpu-0");
  EXPECT_FALSE(d.contains("allowMultipleAllocations"));
  EXPECT_EQ(d["capacity"], json::parse(R"({"memory": {"value": "85520809984"}})"));
}

TEST_F(ConsumableSharesKindTest, MigDevicesAreSharedByMemoryAlike) {
  Open("a100-mig", {ConsumableSharesMode::kMemory, 0});
  bool saw_mig = false;
  for (const auto& d : kind_->PublishedDevices()) {
    EXPECT_TRUE(d.allow_multiple_allocations) << d.name;
    if (kind_->DeviceType(d.name) != "mig") continue;
    saw_mig = true;
    const std::string max = d.capacity.at("memory");
    EXPECT_EQ(d.capacity_policies.at("memory"), (model::CapacityRequestPolicy{max, "1Mi", max, "1Mi"})) << d.name;
    EXPECT_EQ(d.capacity_policies.size(), 1u) << "only memory has a policy, as upstream";
  }
  EXPECT_TRUE(saw_mig);
}

TEST_F(ConsumableSharesKindTest, TwoSharesOfOneGpuArePreparedTogetherAndAThirdOverCapacityIsRefused) {
  Open("h100x8", {ConsumableSharesMode::kMemory, 0});
  const std::string a = "6f1c2a9e-0000-4000-8000-00000000000a", b = "6f1c2a9e-0000-4000-8000-00000000000b",
                    c = "6f1c2a9e-0000-4000-8000-00000000000c";
  auto pa = engine_->PrepareClaim(Share(a, "gpu-0", {{"memory", "40Gi"}}), far_);
  ASSERT_TRUE(pa.ok()) << pa.status().ToString();
  auto pb = engine_->PrepareClaim(Share(b, "gpu-0", {{"memory", "39Gi"}}), far_);
  ASSERT_TRUE(pb.ok()) << pb.status().ToString();
  ASSERT_EQ(pa->size(), 1u);
  ASSERT_EQ(pb->size(), 1u);
  EXPECT_EQ((*pa)[0].share_id, "share-" + a);
  EXPECT_EQ((*pb)[0].share_id, "share-" + b);
  EXPECT_EQ((*pb)[0].device, "gpu-0");
  // 79Gi of 81559Mi are taken: 1Gi more does not fit.
  auto pc = engine_->PrepareClaim(Share(c, "gpu-0", {{"memory", "1Gi"}}), far_);
  ASSERT_FALSE(pc.ok());
  EXPECT_NE(pc.status().message().find("requested device gpu-0 has no room for claim " + c +
                                       ": it publishes memory 85520809984, claims " + a + ", " + b +
                                       " already consume 84825604096 (according to checkpoint) and this claim "
                                       "consumes 1073741824"),
            std::string::npos)
      << pc.status().message();
  EXPECT_FALSE(PathExists(*cdi_->ClaimSpecPath(c)));
  // Once one share is released, the third fits.
  ASSERT_TRUE(engine_->UnprepareClaim({"default", a, "claim-000a"}, far_).ok());
  EXPECT_TRUE(engine_->PrepareClaim({"default", c, "claim-000c"}, far_).ok());
}

TEST_F(ConsumableSharesKindTest, AShareLeftHalfPreparedByADeletedClaimMakesRoomForANewOne) {
  Open("h100x8", {ConsumableSharesMode::kMemory, 0});
  const std::string a = "9c4d0000-0000-4000-8000-00000000000a", b = "9c4d0000-0000-4000-8000-00000000000b",
                    c = "9c4d0000-0000-4000-8000-00000000000c";
  ASSERT_TRUE(engine_->PrepareClaim(Share(a, "gpu-0", {{"memory", "1Gi"}}), far_).ok());
  // b's Prepare stops after PrepareStarted, and b is deleted since: its
  // share still counts, behind a's.
  ASSERT_TRUE(FailPoints::Process().Load("engine-after-device-prepare=error").ok());
  auto rb = Share(b, "gpu-0", {{"memory", "78Gi"}});
  ASSERT_FALSE(engine_->PrepareClaim(rb, far_).ok());
  FailPoints::Process().Clear();
  ASSERT_EQ((*ledger_->Get(b))->state, ledger::ClaimState::kPrepareStarted);
  claims_.Remove(rb.ns, rb.name);
  // c does not fit beside both; b, the second holder, is found gone and
  // unprepared, and c fits beside a.
  auto pc = engine_->PrepareClaim(Share(c, "gpu-0", {{"memory", "2Gi"}}), far_);
  ASSERT_TRUE(pc.ok()) << pc.status().ToString();
  EXPECT_EQ((*ledger_->Get(b))->state, ledger::ClaimState::kTombstone);
}

TEST_F(ConsumableSharesKindTest, SharesNeedEqualConfigAndLeaveTheTimeSliceToTheLastSharer) {
  Open("h100x8", {ConsumableSharesMode::kUnlimited, 0});
  const std::string a = "7a2b0000-0000-4000-8000-00000000000a", b = "7a2b0000-0000-4000-8000-00000000000b",
                    c = "7a2b0000-0000-4000-8000-00000000000c";
  const std::string uuid = inventory_.gpus[2].uuid;
  auto ra = Share(a, "gpu-2", {{"memory", "0"}}, "Long");
  auto rb = Share(b, "gpu-2", {{"memory", "0"}}, "Long");
  ASSERT_TRUE(engine_->PrepareClaim(ra, far_).ok());
  ASSERT_TRUE(engine_->PrepareClaim(rb, far_).ok());
  auto rc = Share(c, "gpu-2", {{"memory", "0"}}, "Short");
  auto pc = engine_->PrepareClaim(rc, far_);
  ASSERT_FALSE(pc.ok());
  EXPECT_NE(pc.status().message().find("requested device gpu-2 has conflicting configuration with already "
                                       "prepared claim " + a),
            std::string::npos)
      << pc.status().message();
  // The first sharer's release leaves the time slice the second still uses.
  ASSERT_TRUE(engine_->UnprepareClaim(ra, far_).ok());
  EXPECT_EQ(ControlLog().find("SetTimeSlice " + uuid + " 0\n"), std::string::npos) << ControlLog();
  ASSERT_TRUE(engine_->UnprepareClaim(rb, far_).ok());
  EXPECT_NE(ControlLog().find("SetTimeSlice " + uuid + " 0\n"), std::string::npos) << ControlLog();
}

TEST_F(ConsumableSharesKindTest, AClaimWithoutAShareHoldsTheGpuAlone) {
  Open("h100x8", {ConsumableSharesMode::kUnlimited, 0});
  const std::string a = "8b3c0000-0000-4000-8000-00000000000a", b = "8b3c0000-0000-4000-8000-00000000000b";
  auto ra = Share(a, "gpu-1", {{"memory", "0"}});
  ASSERT_TRUE(engine_->PrepareClaim(ra, far_).ok());
  driver::ClaimSnapshot c;
  c.uid = b;
  c.ns = "default";
  c.name = "exclusive";
  c.allocated = true;
  c.results = {{"gpu", kDriverName, "node-1", "gpu-1", false, ""}};
  c.consumers = {"pod-b"};
  claims_.Put(c);
  auto pb = engine_->PrepareClaim({"default", b, "exclusive"}, far_);
  ASSERT_FALSE(pb.ok());
  EXPECT_NE(pb.status().message().find("requested device gpu-1 is already allocated to different claim " + a),
            std::string::npos)
      << pb.status().message();
  // A consumed capacity that is no quantity refuses the claim.
  auto bad = engine_->PrepareClaim(Share("8b3c0000-0000-4000-8000-00000000000c", "gpu-1", {{"memory", "lots"}}), far_);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("allocation result of request gpu on device gpu-1: consumedCapacity memory: "
                                        "\"lots\""),
            std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace nvdra::gpu
