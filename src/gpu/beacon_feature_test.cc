// A plug-in of the GPU kind that exists only here, registered only by this
// test (GpuKindOptions::more_features): proof that a per-claim feature is a
// file of its own. The "beacon" plug-in lights a beacon (a file) for each full
// GPU of a claim:
//   publish: every full GPU carries `beacon: true`;
//   Plan:    the beacons, in its own piece of the undo record ("beacons", at
//            version 2), before anything exists;
//   Apply:   the beacon files created;
//   edits:   each device's containers get BEACON=<its beacon file>;
//   Undo:    the files removed, from the piece alone;
//   sweep:   beacon files no record names removed.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cdi/spec.h"
#include "driver/engine.h"
#include "driver/engine_test_util.h"
#include "gpu/claim_feature.h"
#include "gpu/gpu_checkpoint_codec.h"
#include "gpu/gpu_kind.h"
#include "gpu/gpu_test_util.h"
#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::gpu {
namespace {

using nlohmann::json;

struct BeaconUndo final : UndoPieceOf<BeaconUndo> {
  static constexpr std::string_view kKey = "beacons";
  std::map<std::string, std::string> beacons;  // device -> beacon file
  bool Empty() const override { return beacons.empty(); }
  json Encode() const override { return {{"byDevice", beacons}}; }
  int version() const override { return 2; }
  friend bool operator==(const BeaconUndo&, const BeaconUndo&) = default;
};

const UndoPieceCodec& BeaconCodec() {
  static const UndoPieceCodec codec{std::string(BeaconUndo::kKey), 2,
                                    [](const JsonReader& value, int) -> Result<std::unique_ptr<UndoPiece>> {
                                      auto beacons = value.Required<json>("byDevice");
                                      if (!beacons.ok() || !beacons->is_object()) return std::unique_ptr<UndoPiece>();
                                      auto p = std::make_unique<BeaconUndo>();
                                      for (const auto& [device, file] : beacons->items()) {
                                        if (!file.is_string()) return std::unique_ptr<UndoPiece>();
                                        p->beacons[device] = file.get<std::string>();
                                      }
                                      return std::unique_ptr<UndoPiece>(std::move(p));
                                    }};
  return codec;
}

class BeaconFeature final : public ClaimFeature {
 public:
  explicit BeaconFeature(std::string dir) : dir_(std::move(dir)) {}

  std::string_view name() const override { return "beacon"; }
  const UndoPieceCodec* undo_piece() const override { return &BeaconCodec(); }
  void Decorate(const GpuDevice& device, model::PublishedDevice& published) const override {
    if (device.type->name() == kDeviceTypeGpu) published.attributes["beacon"] = true;
  }
  Status Plan(const ClaimPlanning& claim, GpuUndo& undo, driver::ClaimPlan&) const override {
    for (const auto& r : claim.work().results) {
      const GpuDevice* d = claim.Find(r.device);
      if (d == nullptr || d->type->name() != kDeviceTypeGpu) continue;
      undo.Get<BeaconUndo>().beacons[r.device] = dir_ + "/" + claim.work().uid + "-" + r.device;
    }
    return Status::Ok();
  }
  Status Apply(const std::string&, GpuUndo& undo) override {
    for (const auto& [device, file] : undo.Of<BeaconUndo>().beacons) {
      NVDRA_RETURN_IF_ERROR(WriteFileAtomically(file, device + "\n"));
    }
    return Status::Ok();
  }
  Status AddEdits(const GpuUndo& undo, const GpuContainerEdits&, ClaimEditsDraft& draft) const override {
    const auto& beacons = undo.Of<BeaconUndo>().beacons;
    for (auto& [device, edits] : draft.devices) {
      auto it = beacons.find(device->name);
      if (it != beacons.end()) edits.env.push_back("BEACON=" + it->second);
    }
    return Status::Ok();
  }
  Status Undo(const std::string&, const GpuUndo& undo) override {
    ++undos;
    for (const auto& [device, file] : undo.Of<BeaconUndo>().beacons) std::filesystem::remove(file);
    return Status::Ok();
  }
  std::optional<FeatureSweep> sweep() const override { return FeatureSweep{"beacon sweep", true, std::nullopt}; }
  Result<int> SweepOrphans(const UndoRecords& records, bool) override {
    std::vector<std::string> lit;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) lit.push_back(e.path().string());
    NVDRA_ASSIGN_OR_RETURN(std::vector<HeldRecord> all, records());
    std::set<std::string> owned;
    for (const auto& r : all) {
      auto undo = DecodeGpuUndo(r.undo, {BeaconCodec()});
      if (!undo.ok()) continue;
      for (const auto& [device, file] : undo->Of<BeaconUndo>().beacons) owned.insert(file);
    }
    int removed = 0;
    for (const auto& file : lit) {
      if (!owned.count(file)) removed += std::filesystem::remove(file) ? 1 : 0;
    }
    return removed;
  }

  int undos = 0;

 private:
  const std::string dir_;
};

class BeaconFeatureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path();
    Status opened = testing::OpenMockNode("h100x8", dir_, lib_, inventory_);
    ASSERT_TRUE(opened.ok()) << opened.ToString();
    ASSERT_TRUE(MakeDirectories(dir_ + "/beacons").ok());
    cdi_ = std::make_unique<cdi::CdiSpecWriter>(dir_ + "/cdi", "k8s.gpu.nvidia.com");
    ASSERT_TRUE(cdi_->EnsureRoot().ok());
  }
  // A kind with the beacon plug-in registered after the built-in ones.
  std::unique_ptr<GpuKind> NewKind(BeaconFeature** beacon) {
    GpuKindOptions o;
    o.resets.state_path = dir_ + "/time-slice-resets.json";
    o.more_features = [this, beacon](const FeatureContext&) {
      FeatureList list;
      auto f = std::make_unique<BeaconFeature>(dir_ + "/beacons");
      *beacon = f.get();
      list.push_back({std::move(f), true});
      return list;
    };
    return std::make_unique<GpuKind>(inventory_, GpuContainerEdits(devices::ContainerSources::ForLib(*lib_)),
                                     lib_->control(), o);
  }
  std::string CdiText() {
    std::string all;
    for (const auto& e : std::filesystem::directory_iterator(cdi_->root())) {
      auto text = ReadFileToString(e.path().string());
      if (text.ok()) all += *text;
    }
    return all;
  }

  ::nvdra::testing::TempDir tmp_{"nvdra-beacon"};
  std::string dir_;
  std::unique_ptr<devices::DeviceLib> lib_;
  devices::NodeInventory inventory_;
  std::unique_ptr<cdi::CdiSpecWriter> cdi_;
};

TEST_F(BeaconFeatureTest, APlugInOfItsOwnRunsThroughTheKindAndTheEngine) {
  BeaconFeature* beacon = nullptr;
  auto kind = NewKind(&beacon);
  ASSERT_NE(beacon, nullptr);
  // Publish.
  int lit_gpus = 0;
  for (const auto& d : kind->PublishedDevices()) lit_gpus += d.attributes.count("beacon");
  EXPECT_EQ(lit_gpus, 8);

  const GpuCheckpointCodec codec;
  auto ledger = driver::testing::OpenTestLedger(dir_, &codec);
  ASSERT_TRUE(ledger.ok()) << ledger.status().ToString();
  driver::testing::FakeClaimSource claims;
  driver::EngineOptions eo;
  eo.node_name = "node-1";
  driver::Engine engine(eo, **ledger, *kind, claims, *cdi_, nullptr);
  const auto far = std::chrono::steady_clock::now() + std::chrono::hours(1);
  auto claim = driver::testing::PutReservedClaim(claims, "uid-1", kDriverName, "gpu-3");
  const std::string file = dir_ + "/beacons/uid-1-gpu-3";

  // Plan, apply and edits.
  ASSERT_EQ(engine.PrepareClaim(claim, far).status().message(), "");
  EXPECT_TRUE(PathExists(file));
  EXPECT_NE(CdiText().find("BEACON=" + file), std::string::npos) << CdiText();
  auto entries = (*ledger)->List();
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 1u);
  const json& record = entries->at(0).undo;
  EXPECT_EQ(record["beacons"]["byDevice"]["gpu-3"], file) << record.dump();
  EXPECT_EQ(record["pieceVersions"]["beacons"], 2) << "the piece carries its own version";

  // Sweep: a beacon no record names goes; the claim's stays.
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/beacons/uid-gone-gpu-0", "gpu-0\n").ok());
  UndoRecords records = [&]() -> Result<std::vector<HeldRecord>> {
    NVDRA_ASSIGN_OR_RETURN(auto all, (*ledger)->List());
    std::vector<HeldRecord> out;
    for (const auto& e : all) out.push_back({e.undo, e.origin});
    return out;
  };
  auto swept = kind->SweepOrphans(records);
  ASSERT_TRUE(swept.ok()) << swept.status().ToString();
  EXPECT_EQ(*swept, 1);
  EXPECT_FALSE(PathExists(dir_ + "/beacons/uid-gone-gpu-0"));
  EXPECT_TRUE(PathExists(file));

  // Undo, by a kind that has only the ledger's record (a restart).
  kind.reset();
  BeaconFeature* again = nullptr;
  auto restarted = NewKind(&again);
  driver::Engine engine2(eo, **ledger, *restarted, claims, *cdi_, nullptr);
  ASSERT_EQ(engine2.UnprepareClaim(claim, far).message(), "");
  EXPECT_EQ(again->undos, 1);
  EXPECT_FALSE(PathExists(file));

  // A kind without the plug-in keeps the piece verbatim and leaves its beacon.
  GpuKindOptions plain;
  plain.resets.state_path = dir_ + "/time-slice-resets.json";
  GpuKind without(inventory_, GpuContainerEdits(devices::ContainerSources::ForLib(*lib_)), lib_->control(), plain);
  ASSERT_TRUE(WriteFileAtomically(file, "gpu-3\n").ok());
  EXPECT_TRUE(without.Unprepare("uid-1", record).ok());
  EXPECT_TRUE(PathExists(file));
}

}  // namespace
}  // namespace nvdra::gpu
