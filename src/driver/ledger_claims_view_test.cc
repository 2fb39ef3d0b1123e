// What a kind sees of the node's claims through LedgerClaimsView, over a
// real ledger: each claim's state as the view names it, tombstones left
// out, and the two questions kinds ask (a device shared with others, a
// device prepared by a claim not being unprepared).
#include "driver/ledger_claims_view.h"

#include <gtest/gtest.h>

#include "driver/engine_test_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::driver {
namespace {

using testing::kDriver;

class LedgerClaimsViewTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto l = testing::OpenTestLedger(tmp_.path());
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    ledger_ = std::move(l).value();
    view_ = std::make_unique<LedgerClaimsView>(*ledger_);
  }
  void Begin(const std::string& uid, const std::string& device) {
    ledger::BeginPrepareRequest req;
    req.uid = uid;
    req.ns = "default";
    req.name = "c-" + uid;
    req.allocation = {{"r", kDriver, "node-1", device, false, ""}};
    req.undo = {{"devices", {device}}};
    auto b = ledger_->BeginPrepare(req);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
  }
  void Complete(const std::string& uid, const std::string& device) {
    model::PreparedDevice d;
    d.requests = {"r"};
    d.pool = "node-1";
    d.device = device;
    ASSERT_TRUE(ledger_->CompletePrepare(uid, {d}, {{"devices", {device}}}).ok());
  }

  ::nvdra::testing::TempDir tmp_{"nvdra-claims-view"};
  std::unique_ptr<ledger::ClaimLedger> ledger_;
  std::unique_ptr<LedgerClaimsView> view_;
};

TEST_F(LedgerClaimsViewTest, NamesEachHoldingClaimsStateAndLeavesTombstonesOut) {
  Begin("uid-preparing", "gpu-0");
  Begin("uid-prepared", "gpu-1");
  Complete("uid-prepared", "gpu-1");
  Begin("uid-unpreparing", "gpu-2");
  ASSERT_TRUE(ledger_->BeginUnprepare("uid-unpreparing").ok());
  Begin("uid-gone", "gpu-3");
  ASSERT_TRUE(ledger_->BeginUnprepare("uid-gone").ok());
  ASSERT_TRUE(ledger_->FinishUnprepare("uid-gone").ok());

  auto held = view_->HeldClaims();
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  std::map<std::string, HoldState> states;
  for (const auto& c : *held) states[c.uid] = c.state;
  EXPECT_EQ(states, (std::map<std::string, HoldState>{{"uid-preparing", HoldState::kPreparing},
                                                      {"uid-prepared", HoldState::kPrepared},
                                                      {"uid-unpreparing", HoldState::kUnpreparing}}));
  for (const auto& c : *held) {
    if (c.uid != "uid-prepared") continue;
    EXPECT_EQ(c.name, "c-uid-prepared");
    EXPECT_EQ(c.devices, std::vector<std::string>{"gpu-1"});
    ASSERT_EQ(c.allocation.size(), 1u);
    EXPECT_EQ(c.allocation[0].device, "gpu-1");
    EXPECT_EQ(c.undo, nlohmann::json({{"devices", {"gpu-1"}}}));
  }
}

TEST_F(LedgerClaimsViewTest, AClaimBeingUnpreparedNeitherSharesNorKeepsADevicePrepared) {
  Begin("uid-a", "gpu-0");
  Complete("uid-a", "gpu-0");
  Begin("uid-b", "gpu-1");
  ASSERT_TRUE(ledger_->BeginUnprepare("uid-b").ok());

  EXPECT_TRUE(view_->SharedWithOthers("gpu-0", "uid-other"));
  EXPECT_FALSE(view_->SharedWithOthers("gpu-0", "uid-a")) << "a claim does not share with itself";
  EXPECT_FALSE(view_->SharedWithOthers("gpu-1", "uid-other")) << "its holder is on its way out";
  EXPECT_FALSE(view_->SharedWithOthers("gpu-7", "uid-other"));

  EXPECT_TRUE(view_->PreparedByLiveClaim("gpu-0", kDriver));
  EXPECT_FALSE(view_->PreparedByLiveClaim("gpu-0", "compute-domain.nvidia.com")) << "another driver's device";
  EXPECT_FALSE(view_->PreparedByLiveClaim("gpu-1", kDriver));
  EXPECT_FALSE(view_->PreparedByLiveClaim("gpu-7", kDriver));

  auto holders = view_->HoldersOf("gpu-0", "");
  ASSERT_TRUE(holders.ok());
  ASSERT_EQ(holders->size(), 1u);
  EXPECT_EQ((*holders)[0].uid, "uid-a");
  EXPECT_EQ((*holders)[0].state, HoldState::kPrepared);
}

}  // namespace
}  // namespace nvdra::driver
