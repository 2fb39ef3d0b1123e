#include "driver/reloadable_kind.h"

#include <gtest/gtest.h>

#include "driver/engine_test_util.h"

namespace nvdra::driver {
namespace {

using testing::FakeCodec;
using testing::FakeKind;

ClaimWork Work() {
  ClaimWork w;
  w.uid = "uid-1";
  w.results = {{.request = "gpu", .driver = "gpu.nvidia.com", .pool = "node", .device = "gpu-0"}};
  return w;
}

TEST(ReloadableKindTest, RefusesNewClaimsWhileTheDriverIsGoneAndUnpreparesOnTheOldKind) {
  FakeCodec codec("gpu.nvidia.com");
  auto first = std::make_unique<FakeKind>();
  FakeKind* old = first.get();
  ReloadableKind kind(std::move(first), codec);
  auto plan = kind.Plan(Work());
  ASSERT_TRUE(plan.ok());
  ASSERT_TRUE(kind.Prepare(Work(), *plan).ok());

  kind.SetGone("the NVIDIA driver is reloading (driver 570.158.01 went away); retry once it is back");
  EXPECT_TRUE(kind.gone());
  for (const Status& s : {kind.Plan(Work()).status(), kind.CheckReady(Work(), *plan),
                          kind.Prepare(Work(), *plan).status(), kind.Edits(plan->undo, {}).status()}) {
    EXPECT_EQ(s.code(), StatusCode::kUnavailable);
    EXPECT_TRUE(s.retryable());
    EXPECT_NE(s.message().find("driver is reloading"), std::string::npos);
  }
  EXPECT_EQ(old->prepares.load(), 1);
  // The undo record alone, on the kind that prepared the claim.
  ASSERT_TRUE(kind.Unprepare("uid-1", plan->undo).ok());
  EXPECT_EQ(old->unprepared, std::vector<std::string>{"uid-1"});

  auto second = std::make_unique<FakeKind>();
  FakeKind* now = second.get();
  std::shared_ptr<DeviceKind> replaced = kind.Replace(std::move(second));
  EXPECT_EQ(replaced.get(), old);
  EXPECT_FALSE(kind.gone());
  ASSERT_TRUE(kind.Prepare(Work(), *plan).ok());
  EXPECT_EQ(now->prepares.load(), 1);
  EXPECT_EQ(old->prepares.load(), 1);
  EXPECT_EQ(&kind.codec(), &codec);
}

// Devices to publish, from whichever kind is there.
class PublishingKind final : public DeviceKind {
 public:
  explicit PublishingKind(std::string version) : version_(std::move(version)) {}
  std::string driver_name() const override { return "gpu.nvidia.com"; }
  std::string DeviceType(const std::string&) const override { return "gpu"; }
  config::DriverConfigRules ConfigRules(const config::FeatureGates&) const override { return {}; }
  Result<ClaimPlan> Plan(const ClaimWork&) override { return ClaimPlan{}; }
  Result<PreparedClaim> Prepare(const ClaimWork&, const ClaimPlan&) override { return PreparedClaim{}; }
  Result<ClaimEdits> Edits(const nlohmann::json&, const std::vector<std::string>&) override { return ClaimEdits{}; }
  const ledger::KindCodec& codec() const override { return codec_; }
  Status Unprepare(const std::string&, const nlohmann::json&) override { return Status::Ok(); }
  std::vector<std::string> MetricDeviceTypes() const override { return {"gpu"}; }
  std::vector<model::PublishedDevice> PublishedDevices() const override {
    model::PublishedDevice d;
    d.name = "gpu-0";
    d.attributes["driverVersion"] = model::Version{version_};
    return {d};
  }
  void SetRepublish(std::function<void()> republish) override { republish_set = static_cast<bool>(republish); }
  bool republish_set = false;

 private:
  std::string version_;
  FakeCodec codec_{"gpu.nvidia.com"};
};

TEST(ReloadableKindTest, TaintsTheDevicesWhileGoneAndPublishesTheNewKindsAfter) {
  FakeCodec codec("gpu.nvidia.com");
  ReloadableKind kind(std::make_unique<PublishingKind>("570.158.01"), codec);
  kind.SetRepublish([] {});
  ASSERT_EQ(kind.PublishedDevices().size(), 1u);
  EXPECT_TRUE(kind.PublishedDevices()[0].taints.empty());
  kind.SetGone("");
  auto tainted = kind.PublishedDevices();
  ASSERT_EQ(tainted[0].taints.size(), 1u);
  EXPECT_EQ(tainted[0].taints[0].key, "gpu.nvidia.com/driver-reloading");
  EXPECT_EQ(tainted[0].taints[0].effect, "NoSchedule");

  auto next = std::make_unique<PublishingKind>("580.65.06");
  PublishingKind* raw = next.get();
  kind.Replace(std::move(next));
  EXPECT_TRUE(raw->republish_set);  // the plugin's republish carries over
  auto back = kind.PublishedDevices();
  EXPECT_TRUE(back[0].taints.empty());
  EXPECT_EQ(back[0].attributes.at("driverVersion"), model::AttributeValue(model::Version{"580.65.06"}));
}

}  // namespace
}  // namespace nvdra::driver
