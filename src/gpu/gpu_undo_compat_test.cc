// Undo records as the GPU kind wrote them before it became a router over
// plug-ins (testdata/undo-*.json, written by its Plan and Prepare on the
// mock nodes, and by the Go-checkpoint import): each decodes unchanged, is
// applied from its planned form, and is unprepared through the kind, with
// every piece's node work undone. The MPS daemon's root was the plugin
// directory of the run that wrote it: @PLUGIN_DIR@ stands for this one's.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "devices/backends/open_device_lib.h"
#include "devices/mock/mock_device_lib.h"
#include "gpu/gpu_kind.h"
#include "gpu/gpu_test_util.h"
#include "util/file_util.h"
#include "util/test_paths.h"
#include "util/test_temp_dir.h"

namespace nvdra::gpu {
namespace {

using nlohmann::json;

// The Kubernetes side of MPS daemons, in memory.
class Daemons final : public MpsDaemonApi {
 public:
  Status Create(const json& d) override {
    objects.insert(d["metadata"]["name"].get<std::string>());
    return Status::Ok();
  }
  Status CheckReady(const std::string&, const std::string& name, kube::Deadline) override {
    return objects.count(name) ? Status::Ok() : NotFound("deployments.apps \"" + name + "\" not found");
  }
  Status Delete(const std::string&, const std::string& name) override {
    deleted.push_back(name);
    objects.erase(name);
    return Status::Ok();
  }
  Result<std::vector<std::string>> ListForNode(const std::string&, const std::string&) override {
    return std::vector<std::string>(objects.begin(), objects.end());
  }
  std::set<std::string> objects;
  std::vector<std::string> deleted;
};

class Mounts final : public ShmMounter {
 public:
  Status MountTmpfs(const std::string&, const std::string&) override { return Status::Ok(); }
  Status Unmount(const std::string&) override { return Status::Ok(); }
};

class GpuUndoCompatTest : public ::testing::Test {
 protected:
  void Open(const std::string& profile) {
    dir_ = tmp_.path();
    Status opened = testing::OpenMockNode(profile, dir_, lib_, inventory_);
    ASSERT_TRUE(opened.ok()) << opened.ToString();
  }
  json Record(const std::string& name) {
    auto text = ReadFileToString(std::string(NVDRA_SOURCE_DIR) + "/src/gpu/testdata/" + name);
    EXPECT_TRUE(text.ok()) << name;
    std::string s = text.ok() ? *text : "null";
    const std::string marker = "@PLUGIN_DIR@";
    for (auto at = s.find(marker); at != std::string::npos; at = s.find(marker)) {
      s.replace(at, marker.size(), dir_ + "/plugin");
    }
    return json::parse(s);
  }
  // Every gate whose plug-in writes a piece on this node, MPS set up.
  std::unique_ptr<GpuKind> AllFeatures() {
    GpuKindOptions o;
    o.gates = *config::FeatureGates::Parse("PassthroughSupport=true,FabricManagerPartitioning=true,MPSSupport=true");
    o.resets.state_path = dir_ + "/time-slice-resets.json";
    o.mps.settings.plugin_dir = dir_ + "/plugin";
    o.mps.settings.template_path = std::string(NVDRA_SOURCE_DIR) + "/templates/mps-control-daemon.tmpl.yaml";
    o.mps.settings.node_name = "node-1";
    o.mps.settings.ns = "nvdra";
    o.mps.settings.image = "nvdra:test";
    o.mps.settings.shm_size = "1024k";
    o.mps.api = daemons_;
    o.mps.mounter = std::make_shared<Mounts>();
    o.mps.first_poll = std::chrono::milliseconds(1);
    o.pci = &lib_->pci();
    o.passthrough.proc_root = dir_ + "/proc";
    o.passthrough.dev_dir = dir_ + "/no-dev";
    o.passthrough.gpu_free_timeout = std::chrono::milliseconds(0);
    o.passthrough.load_module = [this](const std::string& m) {
      return MakeDirectories(dir_ + "/mock/sys/module/" + m, 0755);
    };
    auto fm = lib_->OpenFabricManager();
    EXPECT_TRUE(fm.ok() && *fm != nullptr);
    auto fabric = FabricPartitions::Open(std::move(fm).value());
    EXPECT_TRUE(fabric.ok()) << fabric.status().ToString();
    o.fabric = std::move(fabric).value();
    return std::make_unique<GpuKind>(inventory_, GpuContainerEdits(devices::ContainerSources::ForLib(*lib_)),
                                     lib_->control(), o);
  }
  std::unique_ptr<GpuKind> WithGates(const std::string& gates) {
    GpuKindOptions o;
    o.gates = *config::FeatureGates::Parse(gates);
    o.resets.state_path = dir_ + "/time-slice-resets.json";
    return std::make_unique<GpuKind>(inventory_, GpuContainerEdits(devices::ContainerSources::ForLib(*lib_)),
                                     lib_->control(), o);
  }
  std::string ControlLog() {
    auto s = ReadFileToString(dir_ + "/mock/state/control.log");
    return s.ok() ? *s : "";
  }
  std::vector<int> ActivePartitions() {
    auto text = ReadFileToString(dir_ + "/mock/state/fabric-manager.json");
    return text.ok() ? json::parse(*text)["active"].get<std::vector<int>>() : std::vector<int>{};
  }
  std::string Driver(const std::string& bus_id) { return lib_->pci().Read(bus_id)->driver; }
  int MigInstances(int gpu) {
    auto l = lib_->control().ListMigInstances(inventory_.gpus[gpu].uuid);
    return l.ok() ? static_cast<int>(l->size()) : -1;
  }

  ::nvdra::testing::TempDir tmp_{"nvdra-undo-compat"};
  std::string dir_;
  std::unique_ptr<devices::DeviceLib> lib_;
  devices::NodeInventory inventory_;
  std::shared_ptr<Daemons> daemons_ = std::make_shared<Daemons>();
};

// The same fields with the same values, a list left empty aside (an empty
// piece is an absent one).
void ExpectSameRecord(const json& written, const json& read) {
  for (const auto& [key, value] : written.items()) {
    if (value.is_array() && value.empty() && key != "devices") {
      EXPECT_FALSE(read.contains(key)) << key;
    } else {
      EXPECT_EQ(read.value(key, json()), value) << key;
    }
  }
  for (const auto& [key, value] : read.items()) EXPECT_TRUE(written.contains(key)) << key;
}

// Time-slicing, MPS, passthrough and a Fabric Manager partition, in one
// claim's record.
TEST_F(GpuUndoCompatTest, ARecordWithEveryPieceIsReadAppliedAndUnprepared) {
  Open("h100x8");
  const json record = Record("undo-all-features.json");
  auto decoded = DecodeGpuUndo(record);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->pieces.size(), 4u);
  EXPECT_TRUE(decoded->unreadable.empty());
  EXPECT_EQ(EncodeGpuUndo(*decoded), record) << "read and written back unchanged";

  auto kind = AllFeatures();
  const std::string uid = "0a7c31f2-5b9e-4d21-8f3a-6c1e9b2d4f70";
  driver::ClaimWork work{uid, "default", "all-features", {}, {}};
  driver::ClaimPlan plan;
  plan.undo = record;  // the planned record is the prepared one: nothing is completed at Prepare
  auto prepared = kind->Prepare(work, plan);
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  ExpectSameRecord(record, prepared->undo);
  const std::string ts_uuid = record["timeSlicing"][0]["uuid"];
  const std::string daemon = record["mps"][0]["deployment"];
  EXPECT_EQ(ActivePartitions(), std::vector<int>{1});
  EXPECT_EQ(Driver("0000:3a:00.0"), "vfio-pci");
  EXPECT_EQ(Driver("0000:5d:00.0"), "vfio-pci");
  EXPECT_EQ(daemons_->objects.count(daemon), 1u);
  EXPECT_NE(ControlLog().find("SetTimeSlice " + ts_uuid + " 3\n"), std::string::npos) << ControlLog();
  EXPECT_TRUE(kind->AwaitReady(work, record).ok());

  ASSERT_TRUE(kind->Unprepare(uid, record).ok());
  EXPECT_TRUE(ActivePartitions().empty());
  EXPECT_EQ(Driver("0000:3a:00.0"), "nvidia");
  EXPECT_EQ(Driver("0000:5d:00.0"), "nvidia");
  EXPECT_EQ(daemons_->deleted, std::vector<std::string>{daemon});
  EXPECT_FALSE(PathExists(record["mps"][0]["root"].get<std::string>()));
  EXPECT_NE(ControlLog().find("SetTimeSlice " + ts_uuid + " 0\n"), std::string::npos) << ControlLog();
}

// A dynamic MIG record: planned, applied (completing its piece as it was
// completed then) and unprepared, also by a plugin now without the gate.
TEST_F(GpuUndoCompatTest, ADynamicMigRecordIsAppliedAndUnpreparedWithOrWithoutTheGate) {
  Open("dynamic-mig");
  const json planned = Record("undo-dynamic-mig-planned.json");
  const json completed = Record("undo-dynamic-mig.json");
  for (const json* r : {&planned, &completed}) {
    auto decoded = DecodeGpuUndo(*r);
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    ExpectSameRecord(*r, EncodeGpuUndo(*decoded));
  }
  auto kind = WithGates("DynamicMIG=true");
  const std::string uid = "7d2e9a41-3c8b-4f06-b5d1-2e9f0a6c8b13";
  driver::ClaimPlan plan;
  plan.undo = planned;
  auto prepared = kind->Prepare({uid, "default", "dynamic-mig", {}, {}}, plan);
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  ExpectSameRecord(completed, prepared->undo);
  EXPECT_EQ(MigInstances(0), 1);
  ASSERT_TRUE(kind->Unprepare(uid, completed).ok());
  EXPECT_EQ(MigInstances(0), 0);

  ASSERT_TRUE(kind->Prepare({uid, "default", "dynamic-mig", {}, {}}, plan).ok());
  EXPECT_EQ(MigInstances(0), 1);
  kind.reset();
  auto without = WithGates("");
  ASSERT_TRUE(without->Unprepare(uid, completed).ok());
  EXPECT_EQ(MigInstances(0), 0) << "destroyed though the plugin now runs without DynamicMIG";
}

// A claim the Go driver prepared with MPS and time-slicing, as its import
// recorded it: the daemon it knows only by id is stopped in this plugin's
// namespace and directory, the time slice reset.
TEST_F(GpuUndoCompatTest, AnImportedRecordIsUnprepared) {
  Open("h100x8");
  const json record = Record("undo-imported.json");
  auto decoded = DecodeGpuUndo(record);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(EncodeGpuUndo(*decoded), record);
  auto kind = AllFeatures();
  const std::string id = record["mps"][0]["id"];
  const std::string root = dir_ + "/plugin/mps/" + id;
  ASSERT_TRUE(MakeDirectories(root + "/shm").ok());
  daemons_->objects.insert("mps-control-daemon-" + id);
  auto edits = kind->Edits(record, {"gpu-6"});
  ASSERT_TRUE(edits.ok()) << edits.status().ToString();
  bool pipe = false;
  for (const auto& m : edits->devices.at(0).edits.mounts) pipe |= m.host_path == root + "/pipe";
  EXPECT_TRUE(pipe) << "the daemon's pipe, where this plugin keeps it";
  ASSERT_TRUE(kind->Unprepare("5f1b8c2e-9a3d-4e7f-b6c0-1d2a3e4f5a6b", record).ok());
  EXPECT_EQ(daemons_->deleted, std::vector<std::string>{"mps-control-daemon-" + id});
  EXPECT_FALSE(PathExists(root));
  const std::string uuid = record["timeSlicing"][0]["uuid"];
  EXPECT_NE(ControlLog().find("SetComputeMode " + uuid + " DEFAULT\n"), std::string::npos) << ControlLog();
  EXPECT_NE(ControlLog().find("SetTimeSlice " + uuid + " 0\n"), std::string::npos) << ControlLog();
}

}  // namespace
}  // namespace nvdra::gpu
