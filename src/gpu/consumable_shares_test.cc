// Consumable shares: the flag, the devices as upstream publishes them in each
// mode, and claims sharing a GPU through the engine and the real ledger.
#include "gpu/consumable_shares.h"

#include <gtest/gtest.h>

#include "devices/backends/open_device_lib.h"
#include "driver/engine.h"
#include "driver/engine_test_util.h"
#include "driver/ledger_claims_view.h"
#include "gpu/gpu_checkpoint_codec.h"
#include "gpu/gpu_kind.h"
#include "kube/slice_builder.h"
#include "ledger/legacy_checkpoint.h"
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
  void Open(const std::string& profile, ConsumableShares shares, const std::string& plugin_dir = "/plugin") {
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
    ASSERT_TRUE(MakeDirectories(dir_ + plugin_dir).ok());
    ledger::LedgerOptions lo;
    lo.dir = dir_ + plugin_dir;
    lo.boot_id = "boot-1";
    lo.codec = &codec_;
    auto ledger = ledger::ClaimLedger::Open(lo);
    ASSERT_TRUE(ledger.ok()) << ledger.status().ToString();
    ledger_ = std::move(ledger).value();
    GpuKindOptions ko;
    ko.gates = kGateOn;
    ko.consumable_shares = shares;
    view_ = std::make_unique<driver::LedgerClaimsView>(*ledger_);
    ko.shared_with_others = SharedWithOthersIn(*view_);
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
  model::ClaimRef Share(const std::string& uid, const std::string& device, std::map<std::string, std::string> consumed,
                        const std::string& interval = "") {
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
  std::unique_ptr<driver::LedgerClaimsView> view_;
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

// Every amount is checked at Prepare, whether or not another claim holds
// the device: a negative share makes no room for two whole ones, a zero
// share is below memory mode's 1Mi, and a share larger than the GPU (4Ei, or
// one that saturates the int64 range) is refused on its own.
TEST_F(ConsumableSharesKindTest, EveryShareIsRangeCheckedAloneOrBesideOthers) {
  Open("h100x8", {ConsumableSharesMode::kMemory, 0});
  const std::string n = "7a1c0000-0000-4000-8000-00000000000e", a = "7a1c0000-0000-4000-8000-00000000000a",
                    b = "7a1c0000-0000-4000-8000-00000000000b", z = "7a1c0000-0000-4000-8000-00000000000f",
                    h = "7a1c0000-0000-4000-8000-00000000000c", s = "7a1c0000-0000-4000-8000-00000000000d";
  auto pn = engine_->PrepareClaim(Share(n, "gpu-0", {{"memory", "-81559Mi"}}), far_);
  ASSERT_FALSE(pn.ok());
  EXPECT_EQ(pn.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(pn.status().message().find("requested device gpu-0: claim " + n +
                                       " consumes memory -85520809984, a negative amount"),
            std::string::npos)
      << pn.status().message();
  ASSERT_TRUE(engine_->PrepareClaim(Share(a, "gpu-0", {{"memory", "81559Mi"}}), far_).ok());
  auto pb = engine_->PrepareClaim(Share(b, "gpu-0", {{"memory", "81559Mi"}}), far_);
  ASSERT_FALSE(pb.ok());
  EXPECT_NE(pb.status().message().find("requested device gpu-0 has no room for claim " + b), std::string::npos);
  auto pz = engine_->PrepareClaim(Share(z, "gpu-1", {{"memory", "0"}}), far_);
  ASSERT_FALSE(pz.ok());
  EXPECT_NE(pz.status().message().find("requested device gpu-1: claim " + z +
                                       " consumes memory 0, below the least share of it the device admits "
                                       "(1048576)"),
            std::string::npos)
      << pz.status().message();
  auto ph = engine_->PrepareClaim(Share(h, "gpu-1", {{"memory", "4Ei"}}), far_);
  ASSERT_FALSE(ph.ok());
  EXPECT_NE(ph.status().message().find("requested device gpu-1 has no room for claim " + h +
                                       ": it publishes memory 85520809984 and this claim consumes "
                                       "4611686018427387904"),
            std::string::npos)
      << ph.status().message();
  auto ps = engine_->PrepareClaim(Share(s, "gpu-1", {{"memory", "100Ei"}}), far_);
  ASSERT_FALSE(ps.ok());
  EXPECT_NE(ps.status().message().find("has no room for claim " + s), std::string::npos) << ps.status().message();
  for (const auto& uid : {n, b, z, h, s}) EXPECT_FALSE(PathExists(*cdi_->ClaimSpecPath(uid))) << uid;
  // Nothing refused was recorded: the whole GPU is still free for one share.
  const std::string w = "7a1c0000-0000-4000-8000-000000000010";
  EXPECT_TRUE(engine_->PrepareClaim(Share(w, "gpu-1", {{"memory", "81559Mi"}}), far_).ok());
}

// Where the request policy's minimum is zero (unlimited), a claim may
// consume no memory; the count of shares is still range-checked.
TEST_F(ConsumableSharesKindTest, ZeroIsAdmittedWhereThePolicyAdmitsIt) {
  Open("h100x8", {ConsumableSharesMode::kCount, 2});
  const std::string a = "7b1c0000-0000-4000-8000-00000000000a", b = "7b1c0000-0000-4000-8000-00000000000b",
                    c = "7b1c0000-0000-4000-8000-00000000000c";
  auto pa = engine_->PrepareClaim(Share(a, "gpu-0", {{"memory", "0"}, {"shares", "1"}}), far_);
  ASSERT_TRUE(pa.ok()) << pa.status().ToString();
  auto pb = engine_->PrepareClaim(Share(b, "gpu-0", {{"memory", "0"}, {"shares", "0"}}), far_);
  ASSERT_FALSE(pb.ok());
  EXPECT_NE(pb.status().message().find("requested device gpu-0: claim " + b +
                                       " consumes shares 0, below the least share of it the device admits (1)"),
            std::string::npos)
      << pb.status().message();
  auto pc = engine_->PrepareClaim(Share(c, "gpu-1", {{"memory", "0"}, {"shares", "3"}}), far_);
  ASSERT_FALSE(pc.ok());
  EXPECT_NE(pc.status().message().find("requested device gpu-1 has no room for claim " + c +
                                       ": it publishes shares 2 and this claim consumes 3"),
            std::string::npos)
      << pc.status().message();
}

// A node handed back to the Go driver (nvdractl ledger export-upstream) and
// migrated again keeps its shares: the export writes each result's
// consumedCapacity, the import reads it into the claim's shares, and a third
// share that does not fit beside them is still refused.
TEST_F(ConsumableSharesKindTest, SharesSurviveAnExportToTheGoDriverAndTheImportBack) {
  Open("h100x8", {ConsumableSharesMode::kMemory, 0});
  const std::string a = "5d2e0000-0000-4000-8000-00000000000a", b = "5d2e0000-0000-4000-8000-00000000000b",
                    c = "5d2e0000-0000-4000-8000-00000000000c";
  ASSERT_TRUE(engine_->PrepareClaim(Share(a, "gpu-0", {{"memory", "40Gi"}}), far_).ok());
  ASSERT_TRUE(engine_->PrepareClaim(Share(b, "gpu-0", {{"memory", "39Gi"}}), far_).ok());
  std::vector<ledger::ClaimEntry> before;
  for (const auto& uid : {a, b}) {
    auto e = ledger_->Get(uid);
    ASSERT_TRUE(e.ok() && e->has_value());
    before.push_back(**e);
  }
  ASSERT_EQ(before[0].shares.size(), 1u);
  const auto releases = {ledger::UpstreamRelease::kV25_12_0, ledger::UpstreamRelease::kV0_4_0,
                         ledger::UpstreamRelease::kV0_4_1, ledger::UpstreamRelease::kMain};
  int round = 0;
  for (ledger::UpstreamRelease release : releases) {
    SCOPED_TRACE(ledger::UpstreamReleaseName(release));
    const std::string text = ledger::WriteLegacyCheckpoint(before, "boot-1", &codec_, release);
    auto doc = json::parse(text);
    EXPECT_EQ(doc["v2"]["preparedClaims"][a]["status"]["allocation"]["devices"]["results"][0]["consumedCapacity"],
              json({{"memory", "40Gi"}}));
    const std::string plugin = "/plugin-" + std::to_string(++round);
    ASSERT_TRUE(MakeDirectories(dir_ + plugin).ok());
    ASSERT_TRUE(WriteFileAtomically(dir_ + plugin + "/" + ledger::kLegacyCheckpointFileName, text).ok());
    TearDown();
    Open("h100x8", {ConsumableSharesMode::kMemory, 0}, plugin);
    ASSERT_EQ(ledger_->report().imported_legacy_claims, 2u) << ledger_->report().Summary();
    for (const auto& was : before) {
      auto now = ledger_->Get(was.uid);
      ASSERT_TRUE(now.ok() && now->has_value());
      ASSERT_EQ((*now)->shares.size(), was.shares.size());
      for (size_t i = 0; i < was.shares.size(); ++i) {
        EXPECT_EQ((*now)->shares[i].resource, was.shares[i].resource);
        EXPECT_EQ((*now)->shares[i].share_id, was.shares[i].share_id);
        EXPECT_EQ((*now)->shares[i].consumed, was.shares[i].consumed);
      }
    }
    // 79Gi of 81559Mi are taken: 1Gi more does not fit; 1Mi less does.
    auto pc = engine_->PrepareClaim(Share(c, "gpu-0", {{"memory", "1Gi"}}), far_);
    ASSERT_FALSE(pc.ok());
    EXPECT_NE(pc.status().message().find("requested device gpu-0 has no room for claim " + c +
                                         ": it publishes memory "
                                         "85520809984, claims " +
                                         a + ", " + b + " already consume 84825604096"),
              std::string::npos)
        << pc.status().message();
    const std::string d = "5d2e0000-0000-4000-8000-0000000000" + std::to_string(10 + round);
    ASSERT_TRUE(engine_->PrepareClaim(Share(d, "gpu-0", {{"memory", "663Mi"}}), far_).ok());
    ASSERT_TRUE(engine_->UnprepareClaim({"default", d, "claim-" + d.substr(d.size() - 4)}, far_).ok());
  }
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
                                       "prepared claim " +
                                       a),
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
