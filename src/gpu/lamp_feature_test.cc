// A plug-in of the GPU kind that exists only here, registered only by this
// test (GpuKindOptions::more_features): proof that a per-claim feature is a
// file of its own. The "lamp" plug-in lights a lamp (a file) for each full
// GPU of a claim that asks for it (a device attribute on the request's
// class is beyond this test: every full GPU of the claim gets one):
//   publish: every full GPU carries `lamp: true`;
//   Plan:    the lamps, in its own piece of the undo record ("lamps", at
//            version 2), before anything exists;
//   Apply:   the lamp files created;
//   edits:   each device's containers get LAMP=<its lamp file>;
//   Undo:    the files removed, from the piece alone;
//   sweep:   lamp files no record names removed.
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

struct LampUndo final : UndoPieceOf<LampUndo> {
  static constexpr std::string_view kKey = "lamps";
  std::map<std::string, std::string> lamps;  // device -> lamp file
  bool Empty() const override { return lamps.empty(); }
  json Encode() const override { return {{"byDevice", lamps}}; }
  int version() const override { return 2; }
  friend bool operator==(const LampUndo&, const LampUndo&) = default;
};

const UndoPieceCodec& LampCodec() {
  static const UndoPieceCodec codec{
      std::string(LampUndo::kKey), 2, [](const JsonReader& value, int) -> Result<std::unique_ptr<UndoPiece>> {
        auto lamps = value.Required<json>("byDevice");
        if (!lamps.ok() || !lamps->is_object()) return std::unique_ptr<UndoPiece>();
        auto p = std::make_unique<LampUndo>();
        for (const auto& [device, file] : lamps->items()) {
          if (!file.is_string()) return std::unique_ptr<UndoPiece>();
          p->lamps[device] = file.get<std::string>();
        }
        return std::unique_ptr<UndoPiece>(std::move(p));
      }};
  return codec;
}

class LampFeature final : public ClaimFeature {
 public:
  explicit LampFeature(std::string dir) : dir_(std::move(dir)) {}

  std::string_view name() const override { return "lamp"; }
  const UndoPieceCodec* undo_piece() const override { return &LampCodec(); }
  void Decorate(const GpuDevice& device, model::PublishedDevice& published) const override {
    if (device.type->name() == kDeviceTypeGpu) published.attributes["lamp"] = true;
  }
  Status Plan(const ClaimPlanning& claim, GpuUndo& undo, driver::ClaimPlan&) const override {
    for (const auto& r : claim.work().results) {
      const GpuDevice* d = claim.Find(r.device);
      if (d == nullptr || d->type->name() != kDeviceTypeGpu) continue;
      undo.Get<LampUndo>().lamps[r.device] = dir_ + "/" + claim.work().uid + "-" + r.device;
    }
    return Status::Ok();
  }
  Status Apply(const std::string&, GpuUndo& undo) override {
    for (const auto& [device, file] : undo.Of<LampUndo>().lamps) {
      NVDRA_RETURN_IF_ERROR(WriteFileAtomically(file, device + "\n"));
    }
    return Status::Ok();
  }
  Status AddEdits(const GpuUndo& undo, const GpuContainerEdits&, ClaimEditsDraft& draft) const override {
    const auto& lamps = undo.Of<LampUndo>().lamps;
    for (auto& [device, edits] : draft.devices) {
      auto it = lamps.find(device->name);
      if (it != lamps.end()) edits.env.push_back("LAMP=" + it->second);
    }
    return Status::Ok();
  }
  Status Undo(const std::string&, const GpuUndo& undo) override {
    ++undos;
    for (const auto& [device, file] : undo.Of<LampUndo>().lamps) std::filesystem::remove(file);
    return Status::Ok();
  }
  std::optional<FeatureSweep> sweep() const override {
    return FeatureSweep{"lamp sweep", true, std::nullopt};
  }
  Result<int> SweepOrphans(const UndoRecords& records, bool) override {
    std::vector<std::string> lit;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) lit.push_back(e.path().string());
    NVDRA_ASSIGN_OR_RETURN(std::vector<json> all, records());
    std::set<std::string> owned;
    for (const auto& r : all) {
      auto undo = DecodeGpuUndo(r, {LampCodec()});
      if (!undo.ok()) continue;
      for (const auto& [device, file] : undo->Of<LampUndo>().lamps) owned.insert(file);
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

class LampFeatureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path();
    Status opened = testing::OpenMockNode("h100x8", dir_, lib_, inventory_);
    ASSERT_TRUE(opened.ok()) << opened.ToString();
    ASSERT_TRUE(MakeDirectories(dir_ + "/lamps").ok());
    cdi_ = std::make_unique<cdi::CdiSpecWriter>(dir_ + "/cdi", "k8s.gpu.nvidia.com");
    ASSERT_TRUE(cdi_->EnsureRoot().ok());
  }
  // A kind with the lamp plug-in registered after the built-in ones.
  std::unique_ptr<GpuKind> NewKind(LampFeature** lamp) {
    GpuKindOptions o;
    o.resets.state_path = dir_ + "/time-slice-resets.json";
    o.more_features = [this, lamp](const FeatureContext&) {
      FeatureList list;
      auto f = std::make_unique<LampFeature>(dir_ + "/lamps");
      *lamp = f.get();
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

  ::nvdra::testing::TempDir tmp_{"nvdra-lamp"};
  std::string dir_;
  std::unique_ptr<devices::DeviceLib> lib_;
  devices::NodeInventory inventory_;
  std::unique_ptr<cdi::CdiSpecWriter> cdi_;
};

TEST_F(LampFeatureTest, APlugInOfItsOwnRunsThroughTheKindAndTheEngine) {
  LampFeature* lamp = nullptr;
  auto kind = NewKind(&lamp);
  ASSERT_NE(lamp, nullptr);
  // Publish.
  int lit_gpus = 0;
  for (const auto& d : kind->PublishedDevices()) lit_gpus += d.attributes.count("lamp");
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
  const std::string file = dir_ + "/lamps/uid-1-gpu-3";

  // Plan, apply and edits.
  ASSERT_EQ(engine.PrepareClaim(claim, far).status().message(), "");
  EXPECT_TRUE(PathExists(file));
  EXPECT_NE(CdiText().find("LAMP=" + file), std::string::npos) << CdiText();
  auto entries = (*ledger)->List();
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 1u);
  const json& record = entries->at(0).undo;
  EXPECT_EQ(record["lamps"]["byDevice"]["gpu-3"], file) << record.dump();
  EXPECT_EQ(record["pieceVersions"]["lamps"], 2) << "the piece carries its own version";

  // Sweep: a lamp no record names goes; the claim's stays.
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/lamps/uid-gone-gpu-0", "gpu-0\n").ok());
  UndoRecords records = [&]() -> Result<std::vector<json>> {
    NVDRA_ASSIGN_OR_RETURN(auto all, (*ledger)->List());
    std::vector<json> out;
    for (const auto& e : all) out.push_back(e.undo);
    return out;
  };
  auto swept = kind->SweepOrphans(records);
  ASSERT_TRUE(swept.ok()) << swept.status().ToString();
  EXPECT_EQ(*swept, 1);
  EXPECT_FALSE(PathExists(dir_ + "/lamps/uid-gone-gpu-0"));
  EXPECT_TRUE(PathExists(file));

  // Undo, by a kind that has only the ledger's record (a restart).
  kind.reset();
  LampFeature* again = nullptr;
  auto restarted = NewKind(&again);
  driver::Engine engine2(eo, **ledger, *restarted, claims, *cdi_, nullptr);
  ASSERT_EQ(engine2.UnprepareClaim(claim, far).message(), "");
  EXPECT_EQ(again->undos, 1);
  EXPECT_FALSE(PathExists(file));

  // A kind without the plug-in keeps the piece verbatim and leaves its lamp.
  GpuKindOptions plain;
  plain.resets.state_path = dir_ + "/time-slice-resets.json";
  GpuKind without(inventory_, GpuContainerEdits(devices::ContainerSources::ForLib(*lib_)), lib_->control(), plain);
  ASSERT_TRUE(WriteFileAtomically(file, "gpu-3\n").ok());
  EXPECT_TRUE(without.Unprepare("uid-1", record).ok());
  EXPECT_TRUE(PathExists(file));
}

}  // namespace
}  // namespace nvdra::gpu
