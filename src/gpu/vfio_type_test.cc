#include "gpu/vfio_type.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cdi/spec.h"
#include "devices/backends/open_device_lib.h"
#include "devices/mock/mock_device_lib.h"
#include "devices/mock/mock_pci_sysfs.h"
#include "driver/engine.h"
#include "driver/engine_test_util.h"
#include "driver/ledger_claims_view.h"
#include "gpu/gpu_checkpoint_codec.h"
#include "gpu/gpu_kind.h"
#include "gpu/gpu_test_util.h"
#include "ledger/claim_ledger.h"
#include "util/failpoint.h"
#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::gpu {
namespace {

// On the h100x8 mock with PassthroughSupport: every GPU also gpu-vfio-<i>.
class VfioTypeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path();
    Status opened = testing::OpenMockNode("h100x8", dir_, lib_, inventory_);
    ASSERT_TRUE(opened.ok()) << opened.ToString();
    first_ = &inventory_.gpus[0];
    for (const auto& g : inventory_.gpus) {
      if (g.pci_bus_id < first_->pci_bus_id) first_ = &g;
    }
    cdi_ = std::make_unique<cdi::CdiSpecWriter>(dir_ + "/cdi", "k8s.gpu.nvidia.com");
    auto gates = config::FeatureGates::Parse("PassthroughSupport=true");
    ASSERT_TRUE(gates.ok()) << gates.status().ToString();
    gates_ = *gates;
    GpuKindOptions ko;
    ko.gates = gates_;
    ko.resets.state_path = dir_ + "/time-slice-resets.json";
    kind_ = MakeKind(inventory_);
  }
  // The mock's /dev, a /proc that shows this process alone (tests running
  // beside it may hold a node with the same device number), no wait for a
  // busy GPU, and a module loader that records what it is asked for.
  PassthroughHost Host() {
    PassthroughHost h;
    const std::string proc = dir_ + "/proc";
    const std::string self = std::to_string(::getpid());
    if (!PathExists(proc + "/" + self)) {
      EXPECT_TRUE(MakeDirectories(proc).ok());
      EXPECT_EQ(::symlink(("/proc/" + self).c_str(), (proc + "/" + self).c_str()), 0);
    }
    h.proc_root = proc;
    h.dev_dir = lib_->driver_root().container_root() + "/dev";
    h.persistenced_socket = dir_ + "/nvidia-persistenced/socket";
    h.gpu_free_timeout = std::chrono::milliseconds(0);
    h.gpu_free_poll = std::chrono::milliseconds(1);
    h.load_module = [this](const std::string& m) -> Status {
      loaded_.push_back(m);
      if (!module_loads_) return Internal("modprobe: FATAL: Module " + m + " not found");
      return MakeDirectories(dir_ + "/mock/sys/module/" + m, 0755);
    };
    return h;
  }
  std::unique_ptr<GpuKind> MakeKind(const devices::NodeInventory& inventory,
                                    std::function<bool(const std::string&)> device_prepared = nullptr) {
    GpuKindOptions ko;
    ko.device_prepared = std::move(device_prepared);
    ko.gates = gates_;
    ko.resets.state_path = dir_ + "/time-slice-resets.json";
    ko.pci = &lib_->pci();
    ko.passthrough = Host();
    return std::make_unique<GpuKind>(inventory, GpuContainerEdits(devices::ContainerSources::ForLib(*lib_)),
                                     lib_->control(), ko);
  }
  std::string ControlLog() {
    auto text = ReadFileToString(static_cast<devices::MockDeviceLib&>(*lib_).control_log_path());
    return text.ok() ? *text : "";
  }
  void TearDown() override { FailPoints::Process().Clear(); }
  driver::ClaimWork Work(const std::string& uid, const std::string& device, VfioDeviceConfig c = {}) {
    driver::ClaimWork w{uid, "default", "c-" + uid, {}, {}};
    w.results.push_back({"vm", kDriverName, "node-1", device, false, ""});
    if (!c.iommu) c.iommu = IommuConfig{std::string(kIommuLegacyOnly), false};
    w.groups.push_back({c, {}, w.results});
    return w;
  }
  std::string Driver(const devices::GpuInfo& g) { return lib_->pci().Read(g.pci_bus_id)->driver; }
  std::string GroupNode(const devices::GpuInfo& g) {
    return "/dev/vfio/" + std::to_string(devices::MockIommuGroup(g.minor));
  }

  ::nvdra::testing::TempDir tmp_{"nvdra-vfio"};
  std::string dir_;
  std::unique_ptr<devices::DeviceLib> lib_;
  devices::NodeInventory inventory_;
  const devices::GpuInfo* first_ = nullptr;
  config::FeatureGates gates_;
  std::unique_ptr<cdi::CdiSpecWriter> cdi_;
  std::unique_ptr<driver::LedgerClaimsView> view_;  // before kind_: outlives it
  std::unique_ptr<GpuKind> kind_;
  std::vector<std::string> loaded_;
  bool module_loads_ = true;
};

TEST(VfioDeviceUuidTest, IsUpstreamsNameBasedUuid) {
  // uuid.NewSHA1(uuid.NameSpaceDNS, []byte("0000:3b:00.0")), as Go computes it.
  std::string u = VfioDeviceUuid("0000:3b:00.0");
  ASSERT_EQ(u.size(), 36u);
  EXPECT_EQ(u[14], '5') << u << ": version 5";
  EXPECT_TRUE(u[19] == '8' || u[19] == '9' || u[19] == 'a' || u[19] == 'b') << u << ": RFC 4122 variant";
  EXPECT_EQ(u, VfioDeviceUuid("0000:3b:00.0"));
  EXPECT_NE(u, VfioDeviceUuid("0000:3c:00.0"));
  // The example of Python's uuid documentation, and the bus id as Go's and
  // Python's uuid5 give it.
  EXPECT_EQ(VfioDeviceUuid("python.org"), "886313e1-3b8a-5372-9b90-0c9aee199e5d");
  EXPECT_EQ(u, "5f36833e-54b9-5234-b457-89cdb0ccb109");
}

TEST_F(VfioTypeTest, EveryGpuHasAVfioTwinWithUpstreamsAttributes) {
  std::vector<model::PublishedDevice> devs = kind_->PublishedDevices();
  const model::PublishedDevice* twin = nullptr;
  int twins = 0;
  for (const auto& d : devs) {
    if (d.name.starts_with("gpu-vfio-")) ++twins;
    if (d.name == "gpu-vfio-0") twin = &d;
  }
  EXPECT_EQ(twins, static_cast<int>(inventory_.gpus.size()));
  ASSERT_NE(twin, nullptr);
  EXPECT_EQ(std::get<std::string>(twin->attributes.at("type")), "vfio");
  EXPECT_EQ(std::get<std::string>(twin->attributes.at("resource.kubernetes.io/pciBusID")), first_->pci_bus_id);
  EXPECT_EQ(std::get<std::string>(twin->attributes.at("uuid")), VfioDeviceUuid(first_->pci_bus_id));
  EXPECT_EQ(std::get<std::string>(twin->attributes.at("vendorID")), "0x10de");
  EXPECT_EQ(std::get<std::string>(twin->attributes.at("deviceID")), "0x2330");
  EXPECT_EQ(std::get<bool>(twin->attributes.at("iommuFDEnabled")), false);
  EXPECT_EQ(std::get<std::string>(twin->attributes.at("productName")), first_->product_name);
  EXPECT_TRUE(twin->attributes.count("resource.kubernetes.io/pcieRoot"));
  EXPECT_FALSE(twin->attributes.count("driverVersion")) << "upstream publishes no driver attributes for it";
  EXPECT_EQ(twin->capacity.at("addressableMemory"), std::to_string(uint64_t{256} << 30));
  EXPECT_EQ(kind_->DeviceType("gpu-vfio-0"), "vfio");

  // Without the gate there is none.
  GpuKindOptions ko;
  ko.resets.state_path = dir_ + "/resets-2.json";
  GpuKind plain(inventory_, GpuContainerEdits(devices::ContainerSources::ForLib(*lib_)), lib_->control(), ko);
  for (const auto& d : plain.PublishedDevices()) EXPECT_FALSE(d.name.starts_with("gpu-vfio-")) << d.name;
}

TEST_F(VfioTypeTest, PlanHoldsThePciDeviceForTheTwinAndThePlainGpu) {
  auto vfio = kind_->Plan(Work("uid-v", "gpu-vfio-0"));
  ASSERT_TRUE(vfio.ok()) << vfio.status().ToString();
  EXPECT_NE(std::find(vfio->held.begin(), vfio->held.end(), PciResource(first_->pci_bus_id)), vfio->held.end());
  driver::ClaimWork plain{"uid-g",
                          "default",
                          "c-g",
                          {{"gpu", kDriverName, "node-1", "gpu-" + std::to_string(first_->minor), false, ""}},
                          {}};
  auto gpu = kind_->Plan(plain);
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  EXPECT_NE(std::find(gpu->held.begin(), gpu->held.end(), PciResource(first_->pci_bus_id)), gpu->held.end());
  // Each also holds the other's name: a claim imported from the Go
  // driver's checkpoint holds only its device's name, and still refuses.
  EXPECT_NE(std::find(gpu->held.begin(), gpu->held.end(), "gpu-vfio-0"), gpu->held.end());
  const std::string plain_name = "gpu-" + std::to_string(first_->minor);
  EXPECT_NE(std::find(vfio->held.begin(), vfio->held.end(), plain_name), vfio->held.end());
  EXPECT_EQ(VfioTwinName(inventory_, first_->pci_bus_id), "gpu-vfio-0");
  EXPECT_EQ(VfioTwinName(inventory_, "0000:ff:00.0"), "");
  // The record says what to bind back, before anything changed.
  auto undo = DecodeGpuUndo(vfio->undo);
  ASSERT_TRUE(undo.ok());
  ASSERT_EQ(undo->Of<PassthroughUndo>().gpus.size(), 1u);
  EXPECT_EQ(undo->Of<PassthroughUndo>().gpus[0].pci_bus_id, first_->pci_bus_id);
  EXPECT_EQ(undo->Of<PassthroughUndo>().gpus[0].iommu_group,
            std::optional<int>(devices::MockIommuGroup(first_->minor)));
  EXPECT_EQ(Driver(*first_), "nvidia");
  // Two VfioDeviceConfig groups in one claim are refused, as upstream.
  driver::ClaimWork two = Work("uid-2", "gpu-vfio-0");
  two.results.push_back({"vm2", kDriverName, "node-1", "gpu-vfio-1", false, ""});
  VfioDeviceConfig c;
  c.iommu = IommuConfig{std::string(kIommuLegacyOnly), true};
  two.groups.push_back({c, {}, {two.results[1]}});
  auto refused = kind_->Plan(two);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("contains 2 VFIO device groups, but at most one is supported per claim"),
            std::string::npos)
      << refused.status().ToString();
}

TEST_F(VfioTypeTest, PrepareBindsToVfioPciAndUnprepareBindsBackFromTheRecord) {
  VfioDeviceConfig c;
  c.iommu = IommuConfig{std::string(kIommuLegacyOnly), true};
  driver::ClaimWork w = Work("uid-v", "gpu-vfio-0", c);
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto prepared = kind_->Prepare(w, *plan);
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  EXPECT_EQ(Driver(*first_), "vfio-pci");
  EXPECT_TRUE(PathExists(dir_ + "/mock" + GroupNode(*first_)));
  ASSERT_EQ(prepared->edits.devices.size(), 1u);
  ASSERT_EQ(prepared->edits.devices[0].edits.device_nodes.size(), 1u);
  EXPECT_EQ(prepared->edits.devices[0].edits.device_nodes[0].path, GroupNode(*first_));
  // The claim-wide edits are VFIO's, not the driver's.
  const auto& common = prepared->edits.common;
  EXPECT_NE(std::find(common.env.begin(), common.env.end(), "NVIDIA_VISIBLE_DEVICES=void"), common.env.end());
  ASSERT_EQ(common.device_nodes.size(), 1u);
  EXPECT_EQ(common.device_nodes[0].path, "/dev/vfio/vfio");
  // A repeated Prepare takes the GPU where it is.
  ASSERT_TRUE(kind_->Prepare(w, *plan).ok());
  // The edits read back from the record alone.
  auto again = kind_->Edits(prepared->undo, {"gpu-vfio-0"});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->devices[0].edits.device_nodes[0].path, GroupNode(*first_));

  ASSERT_TRUE(kind_->Unprepare("uid-v", prepared->undo).ok());
  EXPECT_EQ(Driver(*first_), "nvidia");
  EXPECT_FALSE(PathExists(dir_ + "/mock" + GroupNode(*first_)));
  EXPECT_EQ(*ReadFileToString(dir_ + "/mock/sys/bus/pci/devices/" + first_->pci_bus_id + "/driver_override"), "\n");
  // Unprepare again: nothing left to do.
  EXPECT_TRUE(kind_->Unprepare("uid-v", prepared->undo).ok());
}

TEST_F(VfioTypeTest, WithoutTheApiDeviceOnlyTheGroupNode) {
  driver::ClaimWork w = Work("uid-v", "gpu-vfio-1");
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok());
  auto prepared = kind_->Prepare(w, *plan);
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  EXPECT_TRUE(prepared->edits.common.device_nodes.empty());
  ASSERT_TRUE(kind_->Unprepare("uid-v", prepared->undo).ok());
}

TEST_F(VfioTypeTest, AFailureAfterTheUnbindLeavesARecordThatBindsBack) {
  driver::ClaimWork w = Work("uid-v", "gpu-vfio-0");
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok());
  ASSERT_TRUE(FailPoints::Process().Load("vfio-after-unbind=error").ok());
  auto prepared = kind_->Prepare(w, *plan);
  ASSERT_FALSE(prepared.ok());
  EXPECT_EQ(Driver(*first_), "") << "unbound from nvidia, not yet on vfio-pci";
  FailPoints::Process().Clear();
  ASSERT_TRUE(kind_->Unprepare("uid-v", plan->undo).ok());
  EXPECT_EQ(Driver(*first_), "nvidia");
}

// A Prepare cut short at each step of the move to vfio-pci (the failpoint's
// error leaves sysfs as a kill there would), then retried while the claim
// still exists: the retry plans again and finishes the bind; Unprepare gives
// the GPU back to nvidia.
TEST_F(VfioTypeTest, APrepareCutShortAtEveryStepOfTheBindIsFinishedByTheRetry) {
  const std::string override_file = dir_ + "/mock/sys/bus/pci/devices/" + first_->pci_bus_id + "/driver_override";
  ASSERT_TRUE(MakeDirectories(dir_ + "/nvidia-persistenced").ok());
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/nvidia-persistenced/socket", "").ok());
  const std::vector<std::pair<std::string, std::string>> points = {{"vfio-before-unbind", "nvidia"},
                                                                   {"vfio-after-unbind", ""},
                                                                   {"pci-after-driver-override", ""}};
  for (const auto& [point, left_on] : points) {
    SCOPED_TRACE(point);
    driver::ClaimWork w = Work("uid-" + point, "gpu-vfio-0");
    auto plan = kind_->Plan(w);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    ASSERT_TRUE(FailPoints::Process().Load(point + "=error").ok());
    auto cut = kind_->Prepare(w, *plan);
    FailPoints::Process().Clear();
    ASSERT_FALSE(cut.ok());
    EXPECT_NE(cut.status().ToString().find("failpoint " + point + " fired"), std::string::npos);
    ASSERT_EQ(Driver(*first_), left_on);

    auto retry_plan = kind_->Plan(w);
    ASSERT_TRUE(retry_plan.ok()) << retry_plan.status().ToString();
    auto undo = DecodeGpuUndo(retry_plan->undo);
    ASSERT_TRUE(undo.ok());
    EXPECT_TRUE(undo->Of<PassthroughUndo>().gpus[0].restore_persistence)
        << "persistence mode went off in the first attempt";
    auto retried = kind_->Prepare(w, *retry_plan);
    ASSERT_TRUE(retried.ok()) << retried.status().ToString();
    EXPECT_EQ(Driver(*first_), "vfio-pci");
    EXPECT_TRUE(PathExists(dir_ + "/mock" + GroupNode(*first_)));
    ASSERT_TRUE(kind_->Unprepare(w.uid, retry_plan->undo).ok());
    EXPECT_EQ(Driver(*first_), "nvidia");
    EXPECT_EQ(*ReadFileToString(override_file), "\n");
  }
  EXPECT_NE(ControlLog().find("SetPersistenceMode " + first_->uuid + " 1"), std::string::npos) << ControlLog();
}

// An Unprepare cut short at each step of the move back to nvidia: the
// repeated Unprepare finishes it, driver_override cleared included.
TEST_F(VfioTypeTest, AnUnprepareCutShortAtEveryStepOfTheBindBackIsFinishedByTheRetry) {
  const std::string override_file = dir_ + "/mock/sys/bus/pci/devices/" + first_->pci_bus_id + "/driver_override";
  const std::vector<std::pair<std::string, std::string>> points = {{"pci-after-unbind", ""},
                                                                   {"pci-after-driver-override", ""},
                                                                   {"pci-before-override-clear", "nvidia"}};
  for (const auto& [point, left_on] : points) {
    SCOPED_TRACE(point);
    driver::ClaimWork w = Work("uid-" + point, "gpu-vfio-0");
    auto plan = kind_->Plan(w);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    ASSERT_TRUE(kind_->Prepare(w, *plan).ok());
    ASSERT_TRUE(FailPoints::Process().Load(point + "=error").ok());
    Status cut = kind_->Unprepare(w.uid, plan->undo);
    FailPoints::Process().Clear();
    ASSERT_FALSE(cut.ok());
    EXPECT_NE(cut.ToString().find("failpoint " + point + " fired"), std::string::npos) << cut.ToString();
    ASSERT_EQ(Driver(*first_), left_on);
    Status retried = kind_->Unprepare(w.uid, plan->undo);
    ASSERT_TRUE(retried.ok()) << retried.ToString();
    EXPECT_EQ(Driver(*first_), "nvidia");
    EXPECT_EQ(*ReadFileToString(override_file), "\n");
    EXPECT_FALSE(PathExists(dir_ + "/mock" + GroupNode(*first_)));
  }
}

// After a restart NVML no longer sees a GPU left on no driver: it is
// published for passthrough only, under its twin's name, so that the retry
// of the claim that unbound it finds the device and finishes the bind.
TEST_F(VfioTypeTest, AGpuLeftOnNoDriverIsPublishedForPassthroughAndItsClaimsRetryBindsIt) {
  driver::ClaimWork w = Work("uid-v", "gpu-vfio-0");
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok());
  ASSERT_TRUE(FailPoints::Process().Load("vfio-after-unbind=error").ok());
  ASSERT_FALSE(kind_->Prepare(w, *plan).ok());
  FailPoints::Process().Clear();
  ASSERT_EQ(Driver(*first_), "");
  auto inv = lib_->Discover();
  ASSERT_TRUE(inv.ok());
  ASSERT_EQ(inv->gpus.size(), inventory_.gpus.size() - 1) << "as NVML, the mock does not see it";
  auto restarted = MakeKind(*inv);
  std::string bus;
  for (const auto& d : restarted->PublishedDevices()) {
    EXPECT_NE(d.name, "gpu-" + std::to_string(first_->minor));
    if (d.name == "gpu-vfio-0") bus = std::get<std::string>(d.attributes.at("resource.kubernetes.io/pciBusID"));
  }
  EXPECT_EQ(bus, first_->pci_bus_id);
  auto retry_plan = restarted->Plan(w);
  ASSERT_TRUE(retry_plan.ok()) << retry_plan.status().ToString();
  auto retried = restarted->Prepare(w, *retry_plan);
  ASSERT_TRUE(retried.ok()) << retried.status().ToString();
  EXPECT_EQ(Driver(*first_), "vfio-pci");
  ASSERT_TRUE(restarted->Unprepare("uid-v", retry_plan->undo).ok());
  EXPECT_EQ(Driver(*first_), "nvidia");
}

// A GPU on a driver other than nvidia or vfio-pci is still refused.
TEST_F(VfioTypeTest, AGpuOnAnotherDriverIsRefused) {
  driver::ClaimWork w = Work("uid-v", "gpu-vfio-0");
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok());
  ASSERT_TRUE(lib_->pci().Unbind(first_->pci_bus_id).ok());
  const std::string sys = dir_ + "/mock/sys";
  ASSERT_TRUE(MakeDirectories(sys + "/bus/pci/drivers/nouveau").ok());
  ASSERT_TRUE(WriteFileAtomically(sys + "/bus/pci/drivers/nouveau/bind", "").ok());
  ASSERT_TRUE(lib_->pci().Bind(first_->pci_bus_id, "nouveau").ok());
  auto refused = kind_->Prepare(w, *plan);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().ToString().find("is bound to \"nouveau\" driver"), std::string::npos)
      << refused.status().ToString();
  EXPECT_EQ(Driver(*first_), "nouveau");
}

TEST_F(VfioTypeTest, ChecksRefuseBeforeAnythingChanges) {
  const std::string dev = dir_ + "/mock/sys/bus/pci/devices/" + first_->pci_bus_id;
  driver::ClaimWork w = Work("uid-v", "gpu-vfio-0");
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok());
  // SR-IOV VFs.
  ASSERT_TRUE(WriteFileAtomically(dev + "/sriov_numvfs", "2\n").ok());
  auto vfs = kind_->Prepare(w, *plan);
  ASSERT_FALSE(vfs.ok());
  EXPECT_NE(vfs.status().message().find("gpu has 2 VFs, cannot unbind"), std::string::npos) << vfs.status().ToString();
  EXPECT_EQ(Driver(*first_), "nvidia");
  ASSERT_TRUE(RemoveFileIfExists(dev + "/sriov_numvfs").ok());
  // Another device of the IOMMU group on a host driver.
  const std::string group_dir = dir_ + "/mock/sys/kernel/iommu_groups/" +
                                std::to_string(devices::MockIommuGroup(first_->minor)) + "/devices";
  const std::string audio = first_->pci_bus_id.substr(0, first_->pci_bus_id.size() - 1) + "1";
  ASSERT_TRUE(MakeDirectories(dir_ + "/mock/sys/devices/platform/" + audio, 0755).ok());
  ASSERT_EQ(::symlink(("../../../devices/platform/" + audio).c_str(),
                      (dir_ + "/mock/sys/bus/pci/devices/" + audio).c_str()),
            0);
  ASSERT_TRUE(MakeDirectories(dir_ + "/mock/sys/bus/pci/drivers/snd_hda_intel", 0755).ok());
  ASSERT_EQ(::symlink("../../../bus/pci/drivers/snd_hda_intel",
                      (dir_ + "/mock/sys/devices/platform/" + audio + "/driver").c_str()),
            0);
  ASSERT_EQ(::symlink(("../../../../devices/platform/" + audio).c_str(), (group_dir + "/" + audio).c_str()), 0);
  auto group = kind_->Prepare(w, *plan);
  ASSERT_FALSE(group.ok());
  EXPECT_NE(group.status().message().find("also holds " + audio + ", bound to snd_hda_intel"), std::string::npos)
      << group.status().ToString();
  EXPECT_EQ(Driver(*first_), "nvidia");
  // Unbound, the group is usable.
  ::unlink((dir_ + "/mock/sys/devices/platform/" + audio + "/driver").c_str());
  ASSERT_TRUE(kind_->Prepare(w, *plan).ok());
  EXPECT_EQ(Driver(*first_), "vfio-pci");
  // IOMMU off.
  ASSERT_TRUE(kind_->Unprepare("uid-v", plan->undo).ok());
  std::filesystem::remove_all(dir_ + "/mock/sys/kernel/iommu_groups");
  auto off = kind_->Prepare(w, *plan);
  ASSERT_FALSE(off.ok());
  EXPECT_NE(off.status().message().find("IOMMU is not enabled in the kernel"), std::string::npos);
  EXPECT_EQ(Driver(*first_), "nvidia");
}

TEST_F(VfioTypeTest, TheSweepBindsBackWhatNoRecordOwns) {
  const devices::GpuInfo& owned = inventory_.gpus[1];
  const devices::GpuInfo& orphan = inventory_.gpus[2];
  ASSERT_TRUE(devices::ChangePciDriver(lib_->pci(), owned.pci_bus_id, devices::kVfioPciDriver).ok());
  ASSERT_TRUE(devices::ChangePciDriver(lib_->pci(), orphan.pci_bus_id, devices::kVfioPciDriver).ok());
  GpuUndo record;
  record.Get<PassthroughUndo>().gpus.push_back({"gpu-vfio-x", owned.pci_bus_id, std::nullopt, false, false});
  auto records = [&]() -> Result<std::vector<HeldRecord>> {
    return std::vector<HeldRecord>{EncodeGpuUndo(record), nlohmann::json::object()};
  };
  auto n = kind_->SweepOrphans(records);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(Driver(orphan), "nvidia");
  EXPECT_EQ(Driver(owned), "vfio-pci") << "its claim's record owns it";
  EXPECT_EQ(*kind_->SweepOrphans(records), 0);
}

TEST_F(VfioTypeTest, UnprepareBindsBackWithTheGateOff) {
  driver::ClaimWork w = Work("uid-v", "gpu-vfio-0");
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok());
  auto prepared = kind_->Prepare(w, *plan);
  ASSERT_TRUE(prepared.ok());
  GpuKindOptions ko;
  ko.resets.state_path = dir_ + "/resets-2.json";
  ko.pci = &lib_->pci();
  GpuKind plain(inventory_, GpuContainerEdits(devices::ContainerSources::ForLib(*lib_)), lib_->control(), ko);
  ASSERT_TRUE(plain.Unprepare("uid-v", prepared->undo).ok());
  EXPECT_EQ(Driver(*first_), "nvidia");
}

TEST_F(VfioTypeTest, AProcessOnTheGpuKeepsItOnNvidiaUntilItIsGone) {
  const std::string node = lib_->driver_root().container_root() + "/dev/nvidia" + std::to_string(first_->minor);
  ASSERT_TRUE(PathExists(node));
  // O_PATH: the node need not have a driver behind it; fuser counts such an fd too.
  const int fd = ::open(node.c_str(), O_PATH | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  driver::ClaimWork w = Work("uid-v", "gpu-vfio-0");
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto busy = kind_->Prepare(w, *plan);
  ::close(fd);
  ASSERT_FALSE(busy.ok());
  const std::string text = busy.status().message();
  EXPECT_NE(text.find("error waiting for GPU \"" + first_->pci_bus_id + "\" to be free"), std::string::npos) << text;
  EXPECT_NE(text.find("has open fds by process(es): " + std::to_string(::getpid())), std::string::npos) << text;
  EXPECT_EQ(Driver(*first_), "nvidia") << "never taken from a process that uses it";
  // Gone, the retry takes it.
  auto prepared = kind_->Prepare(w, *plan);
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  EXPECT_EQ(Driver(*first_), "vfio-pci");
  ASSERT_TRUE(kind_->Unprepare("uid-v", prepared->undo).ok());
}

TEST_F(VfioTypeTest, WhereNvidiaPersistencedRunsPersistenceModeGoesOffBeforeTheUnbindAndBackOnAfter) {
  driver::ClaimWork w = Work("uid-v", "gpu-vfio-0");
  // Without nvidia-persistenced nothing is toggled.
  auto quiet = kind_->Plan(w);
  ASSERT_TRUE(quiet.ok());
  EXPECT_FALSE(DecodeGpuUndo(quiet->undo)->Of<PassthroughUndo>().gpus[0].restore_persistence);
  ASSERT_TRUE(kind_->Prepare(w, *quiet).ok());
  ASSERT_TRUE(kind_->Unprepare("uid-v", quiet->undo).ok());
  EXPECT_EQ(ControlLog().find("SetPersistenceMode"), std::string::npos) << ControlLog();

  ASSERT_TRUE(MakeDirectories(dir_ + "/nvidia-persistenced").ok());
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/nvidia-persistenced/socket", "").ok());
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok());
  auto undo = DecodeGpuUndo(plan->undo);
  ASSERT_TRUE(undo.ok());
  EXPECT_TRUE(undo->Of<PassthroughUndo>().gpus[0].restore_persistence);
  EXPECT_EQ(undo->Of<PassthroughUndo>().gpus[0].gpu_uuid, first_->uuid);
  EXPECT_EQ(undo->Of<PassthroughUndo>().gpus[0].gpu_minor, std::optional<int>(first_->minor));
  ASSERT_TRUE(kind_->Prepare(w, *plan).ok());
  EXPECT_NE(ControlLog().find("SetPersistenceMode " + first_->uuid + " 0"), std::string::npos) << ControlLog();
  EXPECT_EQ(ControlLog().find("SetPersistenceMode " + first_->uuid + " 1"), std::string::npos);
  // From the record alone, by a kind that never saw the Prepare.
  auto restarted = MakeKind(inventory_);
  ASSERT_TRUE(restarted->Unprepare("uid-v", plan->undo).ok());
  EXPECT_EQ(Driver(*first_), "nvidia");
  EXPECT_NE(ControlLog().find("SetPersistenceMode " + first_->uuid + " 1"), std::string::npos) << ControlLog();
}

TEST_F(VfioTypeTest, AMissingVfioModuleIsLoadedAndAFailedLoadRefusesBeforeTheUnbind) {
  ASSERT_TRUE(std::filesystem::remove(dir_ + "/mock/sys/module/vfio_pci"));
  driver::ClaimWork w = Work("uid-v", "gpu-vfio-0");
  auto plan = kind_->Plan(w);
  ASSERT_TRUE(plan.ok());
  module_loads_ = false;
  auto refused = kind_->Prepare(w, *plan);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("failed to load module \"vfio_pci\""), std::string::npos)
      << refused.status().ToString();
  EXPECT_EQ(Driver(*first_), "nvidia");
  module_loads_ = true;
  ASSERT_TRUE(kind_->Prepare(w, *plan).ok());
  EXPECT_EQ(loaded_, (std::vector<std::string>{"vfio_pci", "vfio_pci"}));
  EXPECT_EQ(Driver(*first_), "vfio-pci");
  // Loaded now: not asked again.
  ASSERT_TRUE(kind_->Unprepare("uid-v", plan->undo).ok());
  ASSERT_TRUE(kind_->Prepare(w, *plan).ok());
  EXPECT_EQ(loaded_.size(), 2u);
  ASSERT_TRUE(kind_->Unprepare("uid-v", plan->undo).ok());
}

TEST_F(VfioTypeTest, AGpuAlreadyOnVfioPciAtStartIsPublishedForPassthroughOnlyUnderItsIndex) {
  std::map<std::string, std::string> bus_of;
  for (const auto& d : kind_->PublishedDevices()) {
    if (d.name.starts_with("gpu-vfio-")) {
      bus_of[d.name] = std::get<std::string>(d.attributes.at("resource.kubernetes.io/pciBusID"));
    }
  }
  ASSERT_TRUE(devices::ChangePciDriver(lib_->pci(), first_->pci_bus_id, devices::kVfioPciDriver).ok());
  // As NVML: the GPU on vfio-pci is not discovered.
  auto inv = lib_->Discover();
  ASSERT_TRUE(inv.ok());
  ASSERT_EQ(inv->gpus.size(), inventory_.gpus.size() - 1);
  auto kind = MakeKind(*inv);
  std::map<std::string, std::string> after;
  for (const auto& d : kind->PublishedDevices()) {
    EXPECT_NE(d.name, "gpu-" + std::to_string(first_->minor)) << "NVML does not see it";
    if (d.name.starts_with("gpu-vfio-")) {
      after[d.name] = std::get<std::string>(d.attributes.at("resource.kubernetes.io/pciBusID"));
      if (d.name == "gpu-vfio-0") EXPECT_TRUE(d.attributes.count("resource.kubernetes.io/pcieRoot"));
    }
  }
  EXPECT_EQ(after, bus_of) << "every twin keeps its name and GPU";
  // A claim prepared before the start owns it; once it is gone, the sweep
  // binds the GPU back.
  GpuUndo record;
  record.Get<PassthroughUndo>().gpus.push_back({"gpu-vfio-0", first_->pci_bus_id, std::nullopt, false, false});
  std::vector<HeldRecord> records = {EncodeGpuUndo(record)};
  auto list = [&]() -> Result<std::vector<HeldRecord>> { return records; };
  EXPECT_EQ(*kind->SweepOrphans(list), 0);
  EXPECT_EQ(Driver(*first_), "vfio-pci");
  records.clear();
  EXPECT_EQ(*kind->SweepOrphans(list), 1);
  EXPECT_EQ(Driver(*first_), "nvidia");
}

TEST(PassthroughHostTest, TheHostRootMustBeMountedAndLendsItsProc) {
  auto none = PassthroughHostAt("", "/driver-root");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(), "host root is required when PassthroughSupport feature gate is enabled");
  auto missing = PassthroughHostAt("/nonexistent-host-root", "/driver-root");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "host root is not mounted at \"/nonexistent-host-root\"");
  ::nvdra::testing::TempDir bare;
  auto empty = PassthroughHostAt(bare.path(), "/driver-root");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->proc_root, "/proc") << "a host root without /proc: this process's";
  EXPECT_EQ(empty->dev_dir, "/driver-root/dev");
  EXPECT_EQ(empty->persistenced_socket, "/driver-root/run/nvidia-persistenced/socket");
  auto root = PassthroughHostAt("/", "/");
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->proc_root, "/proc");
  EXPECT_EQ(root->host_root, "/");
}

TEST(GpuUndoVfioTest, RoundTripsAndKeepsWhatItCannotRead) {
  GpuUndo u;
  u.devices = {"gpu-vfio-0"};
  u.Get<PassthroughUndo>().gpus.push_back({"gpu-vfio-0", "0000:3b:00.0", 40, true, true});
  auto back = DecodeGpuUndo(EncodeGpuUndo(u));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, u);
  auto odd = DecodeGpuUndo(nlohmann::json{{"vfio", {{{"device", "gpu-vfio-0"}}}}});
  ASSERT_TRUE(odd.ok());
  EXPECT_TRUE(odd->Of<PassthroughUndo>().gpus.empty());
  ASSERT_EQ(odd->Of<PassthroughUndo>().unreadable.size(), 1u);
  EXPECT_EQ(EncodeGpuUndo(*odd)["vfio"][0]["device"], "gpu-vfio-0");
  auto other_shape = DecodeGpuUndo(nlohmann::json{{"vfio", "newer"}});
  ASSERT_TRUE(other_shape.ok());
  EXPECT_EQ(EncodeGpuUndo(*other_shape)["vfio"], "newer");
}

// Through the engine and the ledger: the plain GPU and its twin refuse each
// other while one is prepared.
TEST_F(VfioTypeTest, TheLedgerRefusesThePlainGpuWhileItsTwinIsPrepared) {
  ASSERT_TRUE(cdi_->EnsureRoot().ok());
  const GpuCheckpointCodec codec;  // the plugin's: it words the refusal
  auto ledger = driver::testing::OpenTestLedger(dir_, &codec);
  ASSERT_TRUE(ledger.ok()) << ledger.status().ToString();
  driver::testing::FakeClaimSource claims;
  auto put = [&](const std::string& uid, const std::string& device) {
    return driver::testing::PutReservedClaim(claims, uid, kDriverName, device);
  };
  driver::EngineOptions eo;
  eo.node_name = "node-1";
  eo.gates = gates_;
  // The slice withdraws a GPU while its twin is prepared, from the ledger.
  view_ = std::make_unique<driver::LedgerClaimsView>(**ledger);
  kind_ = MakeKind(inventory_, DevicePreparedIn(*view_));
  int republished = 0;
  kind_->SetRepublish([&] { ++republished; });
  auto published = [&](const std::string& name) {
    for (const auto& d : kind_->PublishedDevices()) {
      if (d.name == name) return true;
    }
    return false;
  };
  driver::Engine engine(eo, **ledger, *kind_, claims, *cdi_, nullptr);
  const auto far = std::chrono::steady_clock::now() + std::chrono::hours(1);
  const std::string plain_name = "gpu-" + std::to_string(first_->minor);
  auto vm = put("uid-vm", "gpu-vfio-0");
  auto plain = put("uid-plain", plain_name);
  ASSERT_TRUE(published(plain_name) && published("gpu-vfio-0"));
  ASSERT_EQ(engine.PrepareClaim(vm, far).status().message(), "");
  EXPECT_EQ(Driver(*first_), "vfio-pci");
  EXPECT_FALSE(published(plain_name)) << "withdrawn while its twin is prepared";
  EXPECT_TRUE(published("gpu-vfio-0"));
  EXPECT_EQ(republished, 1);
  std::string refused = engine.PrepareClaim(plain, far).status().message();
  // The plain GPU is the passthrough claim's twin: the same device, held.
  EXPECT_NE(refused.find("requested device " + plain_name + " is already allocated to different claim uid-vm"),
            std::string::npos)
      << refused;
  EXPECT_EQ(Driver(*first_), "vfio-pci");
  ASSERT_EQ(engine.UnprepareClaim(vm, far).message(), "");
  EXPECT_EQ(Driver(*first_), "nvidia");
  EXPECT_TRUE(published(plain_name)) << "back once the twin is unprepared";
  EXPECT_EQ(republished, 2);
  ASSERT_EQ(engine.PrepareClaim(plain, far).status().message(), "");
  EXPECT_FALSE(published("gpu-vfio-0"));
  EXPECT_TRUE(published(plain_name));
  // And the other way round.
  std::string twin_refused = engine.PrepareClaim(vm, far).status().message();
  EXPECT_NE(twin_refused, "");
  EXPECT_EQ(Driver(*first_), "nvidia");
}

// DeviceMetadata, through the engine and a real ledger: the passthrough
// device's metadata file carries its published attributes, a plain GPU's
// none; Unprepare leaves nothing behind.
TEST_F(VfioTypeTest, DeviceMetadataCarriesThePassthroughDevicesPublishedAttributes) {
  ASSERT_TRUE(MakeDirectories(dir_ + "/plugin").ok());
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/boot_id", "boot-1\n").ok());
  ASSERT_TRUE(cdi_->EnsureRoot().ok());
  ledger::LedgerOptions lo;
  lo.dir = dir_ + "/plugin";
  lo.boot_id_path = dir_ + "/boot_id";
  auto ledger = ledger::ClaimLedger::Open(lo);
  ASSERT_TRUE(ledger.ok()) << ledger.status().ToString();
  const std::string uid = "6a1f4b2e-0c3d-4e5f-8a9b-0c1d2e3f4a5b";
  const std::string plain_name = "gpu-" + std::to_string(inventory_.gpus[1].minor);
  driver::ClaimSnapshot c;
  c.uid = uid;
  c.ns = "default";
  c.name = "vm-claim";
  c.allocated = true;
  c.results = {{"vm", kDriverName, "node-1", "gpu-vfio-0", false, ""},
               {"plain", kDriverName, "node-1", plain_name, false, ""}};
  driver::testing::FakeClaimSource claims;
  claims.Put(c);
  ASSERT_TRUE(kind_->HasDeviceMetadata());
  auto gates = config::FeatureGates::Parse("PassthroughSupport=true,DeviceMetadata=true");
  ASSERT_TRUE(gates.ok());
  gates_ = *gates;
  kind_ = MakeKind(inventory_);
  driver::DeviceMetadataFiles files(kDriverName, dir_ + "/plugin", cdi_->root());
  driver::EngineOptions eo;
  eo.node_name = "node-1";
  eo.gates = gates_;
  eo.metadata = &files;
  driver::Engine engine(eo, **ledger, *kind_, claims, *cdi_, nullptr);
  const auto far = std::chrono::steady_clock::now() + std::chrono::hours(1);
  const model::ClaimRef ref{"default", uid, "vm-claim"};
  auto r = engine.PrepareClaim(ref, far);
  ASSERT_EQ(r.status().message(), "");
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ(r->at(0).cdi_device_ids.back(), files.DeviceId(uid, "vm"));
  EXPECT_EQ(r->at(1).cdi_device_ids.back(), files.DeviceId(uid, "plain"));
  auto text = ReadFileToString(files.FilePath("default", "vm-claim", "vm"));
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  auto j = nlohmann::json::parse(*text);
  const auto& dev = j["requests"][0]["devices"][0];
  EXPECT_EQ(dev["name"], "gpu-vfio-0");
  model::PublishedDevice published;
  for (const auto& d : kind_->PublishedDevices()) {
    if (d.name == "gpu-vfio-0") published = d;
  }
  ASSERT_FALSE(published.attributes.empty());
  ASSERT_TRUE(dev.contains("attributes")) << *text;
  EXPECT_EQ(dev["attributes"].size(), published.attributes.size());
  EXPECT_EQ(dev["attributes"]["type"], nlohmann::json({{"string", "vfio"}}));
  auto plain = ReadFileToString(files.FilePath("default", "vm-claim", "plain"));
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(nlohmann::json::parse(*plain)["requests"][0]["devices"][0].contains("attributes")) << *plain;
  ASSERT_EQ(engine.UnprepareClaim(ref, far).message(), "");
  EXPECT_FALSE(PathExists(files.ClaimDir("default", "vm-claim")));
  EXPECT_FALSE(PathExists(files.SpecPath(uid, "vm")));
  EXPECT_FALSE(PathExists(files.SpecPath(uid, "plain")));
}

}  // namespace
}  // namespace nvdra::gpu
