#include "ledger/legacy_checkpoint.h"

#include <gtest/gtest.h>

#include "ledger/claim_ledger.h"
#include "ledger/ledger_test_util.h"
#include "util/file_util.h"

namespace nvdra::ledger {
namespace {

// The Go driver's v2 shape (upstream reference, "Top-level JSON shape").
constexpr const char* kGoCheckpoint = R"({"checksum":1,"v1":{},"v2":{"checksum":2,
 "preparedClaims":{
  "7a4e1a8e-0000-4000-8000-000000000001":{"checkpointState":"PrepareCompleted",
    "status":{"allocation":{"devices":{"results":[
       {"request":"gpu","driver":"gpu.nvidia.com","pool":"node-a","device":"gpu-0"},
       {"request":"nic","driver":"other.example.com","pool":"node-a","device":"nic-0"}],
       "config":[]}}},
    "preparedDevices":[{"devices":[{"gpu":{"info":{"uuid":"GPU-1"},"device":{"Requests":["gpu"],
       "PoolName":"node-a","DeviceName":"gpu-0",
       "CDIDeviceIDs":["k8s.gpu.nvidia.com/claim=7a4e1a8e-0000-4000-8000-000000000001-gpu-0"]}},
       "mig":null}],"configState":{"mpsControlDaemonID":""}}],
    "name":"c1","namespace":"default"},
  "7a4e1a8e-0000-4000-8000-000000000002":{"checkpointState":"PrepareStarted",
    "status":{"allocation":{"devices":{"results":[
       {"request":"gpu","driver":"gpu.nvidia.com","pool":"node-a","device":"gpu-1"}]}}},
    "name":"c2","namespace":"team"}},
 "nodeBootID":"boot-old"}})";

constexpr const char* kUid1 = "7a4e1a8e-0000-4000-8000-000000000001";
constexpr const char* kUid2 = "7a4e1a8e-0000-4000-8000-000000000002";

TEST(LegacyCheckpointTest, ParsesGoV2Checkpoint) {
  auto r = ParseLegacyCheckpoint(kGoCheckpoint, "gpu.nvidia.com", "boot-now");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->entries.size(), 2u);
  const ClaimEntry& a = r->entries[0];
  EXPECT_EQ(a.uid, kUid1);
  EXPECT_EQ(a.state, ClaimState::kPrepareCompleted);
  EXPECT_EQ(a.ns, "default");
  ASSERT_EQ(a.allocation.size(), 1u);  // the other driver's device is not ours
  EXPECT_EQ(a.held, std::vector<std::string>{"gpu-0"});
  ASSERT_EQ(a.prepared.size(), 1u);
  EXPECT_EQ(a.prepared[0].cdi_device_ids[0],
            std::string("k8s.gpu.nvidia.com/claim=") + kUid1 + "-gpu-0");
  EXPECT_EQ(a.undo["legacyCheckpoint"]["preparedDevices"][0]["devices"][0]["gpu"]["info"]["uuid"],
            "GPU-1");
  EXPECT_EQ(a.boot_id, "boot-old");
  EXPECT_EQ(r->entries[1].state, ClaimState::kPrepareStarted);
}

TEST(LegacyCheckpointTest, ParsesV1OnlyAndSnakeCaseDevices) {
  std::string v1 = std::string(R"({"checksum":5,"v1":{"preparedClaims":{"uid-1":[{"devices":[)") +
                   R"({"request_names":["r"],"pool_name":"p","device_name":"channel-0","cdi_device_ids":["x"]}]}]}}})";
  auto r = ParseLegacyCheckpoint(v1, "", "boot-now");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->entries.size(), 1u);
  EXPECT_EQ(r->entries[0].state, ClaimState::kPrepareCompleted);
  EXPECT_EQ(r->entries[0].prepared[0].device, "channel-0");
  EXPECT_EQ(r->entries[0].held, std::vector<std::string>{"channel-0"});
  EXPECT_EQ(r->entries[0].boot_id, "boot-now");
}

TEST(LegacyCheckpointTest, GarbageIsAnError) {
  EXPECT_EQ(ParseLegacyCheckpoint("{not json", "", "b").status().code(), StatusCode::kDataLoss);
}

TEST(LegacyCheckpointTest, LedgerImportsOnceAndLeavesTheFileAlone) {
  testing::ScratchDir dir;
  std::string cp = JoinPath(dir.path(), kLegacyCheckpointFileName);
  ASSERT_TRUE(WriteFileAtomically(cp, kGoCheckpoint).ok());
  LedgerOptions o;
  o.dir = dir.path();
  o.boot_id = "boot-old";
  o.driver_name = "gpu.nvidia.com";
  {
    auto l = std::move(ClaimLedger::Open(o)).value();
    EXPECT_EQ(l->report().imported_legacy_claims, 2u);
    auto b = l->BeginPrepare({kUid1, "default", "c1",
                              {{"gpu", "gpu.nvidia.com", "node-a", "gpu-0", false, ""}},
                              std::nullopt, nullptr, {}});
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    EXPECT_EQ(b->outcome, BeginOutcome::kAlreadyPrepared);
    // The imported holds are enforced.
    auto c = l->BeginPrepare(testing::Request("new-claim", {"gpu-1"}));
    EXPECT_EQ(c.status().message(), std::string("gpu-1 already allocated by claim ") + kUid2 +
                                        " (according to checkpoint)");
    // Unprepare works from the imported entry alone.
    auto u = l->BeginUnprepare(kUid1);
    ASSERT_TRUE(u.ok() && u->has_value());
    ASSERT_TRUE(l->FinishUnprepare(kUid1).ok());
  }
  EXPECT_EQ(*ReadFileToString(cp), kGoCheckpoint);
  auto l = std::move(ClaimLedger::Open(o)).value();
  EXPECT_EQ(l->report().imported_legacy_claims, 0u);  // the ledger is the truth now
  EXPECT_EQ((*l->Get(kUid1))->state, ClaimState::kTombstone);
}

}  // namespace
}  // namespace nvdra::ledger
