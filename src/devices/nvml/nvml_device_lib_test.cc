// Runs the NVML backend against the fake libnvidia-ml.so.1 built in the
// test tree: dlopen from a driver root, symbol loading, discovery, error
// handling and XID events.
#include "devices/nvml/nvml_device_lib.h"
#include "devices/nvml/nvml_library.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <stdlib.h>

#include <atomic>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <thread>

#include "devices/device_info.h"
#include "devices/device_names.h"
#include "devices/nvidia_smi_control.h"
#include "util/file_util.h"
#include "util/mutex.h"
#include "util/test_temp_dir.h"

namespace nvdra::devices {
namespace {

using nlohmann::json;

json BaseConfig() {
  return json::parse(R"({
    "driverVersion": "570.158.01",
    "cudaDriverVersion": 12080,
    "devices": [
      {"minor": 0, "uuid": "GPU-11111111-2222-3333-4444-555555555555", "name": "NVIDIA H100 80GB HBM3",
       "brand": 14, "arch": 9, "cc": [9, 0], "busId": "00000000:3B:00.0", "memoryTotal": 85520809984,
       "addressingMode": 1, "migMode": 0, "moduleId": 3,
       "fabric": {"clusterUuid": "5e2c8a14-7d3b-4f9e-a1c6-0b8d2f4e6a90", "cliqueId": 7, "state": 3, "status": 0}},
      {"minor": 1, "uuid": "GPU-66666666-2222-3333-4444-555555555555", "name": "NVIDIA H100 80GB HBM3",
       "brand": 14, "arch": 9, "cc": [9, 0], "busId": "00000000:1A:00.0", "memoryTotal": 85520809984,
       "migMode": 1,
       "fabric": {"clusterUuid": "5e2c8a14-7d3b-4f9e-a1c6-0b8d2f4e6a90", "cliqueId": 7, "state": 3, "status": 0},
       "giProfiles": [
         {"index": 0, "id": 19, "slices": 1, "sms": 16, "ce": 1, "dec": 1, "enc": 0, "jpeg": 1, "ofa": 0,
          "memoryMB": 9984, "name": "MIG 1g.10gb"},
         {"index": 5, "id": 9, "slices": 3, "sms": 60, "ce": 3, "dec": 3, "enc": 0, "jpeg": 3, "ofa": 0,
          "memoryMB": 40192, "name": "MIG 3g.40gb"}],
       "migs": [
         {"uuid": "MIG-aaaaaaaa-0000-0000-0000-000000000001", "gi": 9, "ci": 0, "giProfileId": 19,
          "ciProfileId": 0, "placement": [6, 1], "ciSlices": 1},
         {"uuid": "MIG-aaaaaaaa-0000-0000-0000-000000000002", "gi": 2, "ci": 0, "giProfileId": 9,
          "ciProfileId": 2, "placement": [4, 4], "ciSlices": 1}]}
    ]
  })");
}

class NvmlDeviceLibTest : public ::testing::Test {
 protected:
  void SetUp() override { Use(BaseConfig()); }
  void TearDown() override { ::unsetenv("FAKE_NVML_CONFIG"); }

  void Use(const json& cfg) {
    std::string path = dir_.path() + "/nvml.json";
    ASSERT_TRUE(WriteFileAtomically(path, cfg.dump(), 0644, false).ok());
    ::setenv("FAKE_NVML_CONFIG", path.c_str(), 1);
  }

  DeviceLibOptions Options(const std::string& root = NVDRA_FAKE_NVML_ROOT) {
    DeviceLibOptions o;
    o.container_driver_root = root;
    o.host_driver_root = "/";
    o.sysfs_root = dir_.path() + "/sys";
    return o;
  }

  // The fake library's init counter, via a second dlopen of the same file.
  int InitCount(const NvmlDeviceLib& lib) {
    void* h = ::dlopen(lib.library().path().c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (h == nullptr) return -1;
    auto fn = reinterpret_cast<int (*)()>(::dlsym(h, "fakeNvmlInitCount"));
    int n = fn ? fn() : -1;
    ::dlclose(h);
    return n;
  }

  nvdra::testing::TempDir dir_;
};

TEST_F(NvmlDeviceLibTest, DiscoversGpusMigDevicesAndClique) {
  // pcieRoot from sysfs for the first GPU only.
  ASSERT_TRUE(MakeDirectories(dir_.path() + "/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0").ok());
  ASSERT_TRUE(MakeDirectories(dir_.path() + "/sys/bus/pci/devices").ok());
  ASSERT_EQ(::symlink("../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0",
                      (dir_.path() + "/sys/bus/pci/devices/0000:3b:00.0").c_str()),
            0);
  ASSERT_TRUE(
      WriteFileAtomically(dir_.path() + "/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/numa_node", "1\n").ok());
  auto lib = NvmlDeviceLib::Open(Options());
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  auto inv = (*lib)->Discover();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(InitCount(**lib), 0) << "every nvmlInit is matched by nvmlShutdown";
  EXPECT_EQ(inv->driver_version, "570.158.01");
  EXPECT_EQ(inv->cuda_driver_version, "12.8");
  EXPECT_EQ(inv->clique_id, "5e2c8a14-7d3b-4f9e-a1c6-0b8d2f4e6a90.7");
  ASSERT_EQ(inv->gpus.size(), 2u);
  const GpuInfo& g0 = inv->gpus[0];
  EXPECT_EQ(g0.minor, 0);
  EXPECT_EQ(g0.uuid, "GPU-11111111-2222-3333-4444-555555555555");
  EXPECT_EQ(g0.product_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(g0.brand, "Nvidia");
  EXPECT_EQ(g0.architecture, "Hopper");
  EXPECT_EQ(g0.cuda_compute_capability, "9.0");
  EXPECT_EQ(g0.pci_bus_id, "0000:3b:00.0");
  EXPECT_EQ(g0.pcie_root, std::optional<std::string>("pci0000:3a"));
  EXPECT_EQ(g0.numa_node, std::optional<int>(1));
  EXPECT_EQ(g0.memory_bytes, std::optional<uint64_t>(85520809984ULL));
  EXPECT_EQ(g0.addressing_mode, std::optional<std::string>("HMM"));
  EXPECT_EQ(g0.module_id, std::optional<int>(3));
  EXPECT_FALSE(g0.mig_enabled);
  const GpuInfo& g1 = inv->gpus[1];
  EXPECT_TRUE(g1.mig_enabled);
  EXPECT_FALSE(g1.pcie_root.has_value());
  EXPECT_FALSE(g1.numa_node.has_value());
  EXPECT_FALSE(g1.addressing_mode.has_value());
  EXPECT_FALSE(g1.module_id.has_value());  // NOT_SUPPORTED: no module id
  ASSERT_EQ(g1.migs.size(), 2u);
  // Sorted by GI id.
  const MigDeviceInfo& big = g1.migs[0];
  EXPECT_EQ(big.gi_id, 2);
  EXPECT_EQ(big.profile, "1c.3g.40gb") << "a CI smaller than its GI is named <c>c.<profile>";
  EXPECT_EQ(big.placement_start, 4);
  EXPECT_EQ(big.placement_size, 4);
  const MigDeviceInfo& small = g1.migs[1];
  EXPECT_EQ(small.uuid, "MIG-aaaaaaaa-0000-0000-0000-000000000001");
  EXPECT_EQ(small.parent_uuid, g1.uuid);
  EXPECT_EQ(small.profile, "1g.10gb");
  EXPECT_EQ(small.gi_profile_id, 19);
  EXPECT_EQ(small.multiprocessors, 16);
  EXPECT_EQ(small.decoders, 1);
  EXPECT_EQ(small.jpeg_engines, 1);
  EXPECT_EQ(small.memory_bytes, 9984ULL << 20);
  std::vector<std::string> names;
  for (const auto& g : inv->gpus) {
    if (!g.mig_enabled) names.push_back(GpuDeviceName(g.minor));
    for (const auto& m : g.migs) names.push_back(MigDeviceName(m));
  }
  EXPECT_EQ(names, (std::vector<std::string>{"gpu-0", "gpu-1-mig-1c3g40gb-9-4", "gpu-1-mig-1g10gb-19-6"}))
      << "the names upstream gives NVML's devices";
}

TEST_F(NvmlDeviceLibTest, MissingLibraryIsARetryableError) {
  auto lib = NvmlDeviceLib::Open(Options(dir_.path()));
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(lib.status().message().find("--container-driver-root"), std::string::npos);
  EXPECT_NE(lib.status().message().find("libnvidia-ml.so.1"), std::string::npos);
}

TEST_F(NvmlDeviceLibTest, NotALibraryIsUnavailable) {
  ASSERT_TRUE(MakeDirectories(dir_.path() + "/usr/lib64").ok());
  ASSERT_TRUE(WriteFileAtomically(dir_.path() + "/usr/lib64/libnvidia-ml.so.1", "not an ELF file").ok());
  auto lib = NvmlDeviceLib::Open(Options(dir_.path()));
  ASSERT_FALSE(lib.ok());
  EXPECT_TRUE(lib.status().retryable()) << lib.status().ToString();
}

TEST_F(NvmlDeviceLibTest, MissingRequiredSymbolIsNamed) {
  auto lib = NvmlDeviceLib::Open(Options(NVDRA_FAKE_NVML_PARTIAL_ROOT));
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(lib.status().message().find("nvmlDeviceGetMigMode"), std::string::npos) << lib.status().ToString();
}

bool Mapped(const std::string& path) {
  auto maps = ReadFileToString("/proc/self/maps");
  return maps.ok() && maps->find(path) != std::string::npos;
}

// A driver upgrade: NVML is unloaded while the driver is gone (nothing of
// it stays mapped; calls answer as NVML does before nvmlInit), and loaded
// again from the driver root once it is back.
TEST_F(NvmlDeviceLibTest, ReleasesTheDriverAndLoadsItAgain) {
  auto lib = NvmlDeviceLib::Open(Options());
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  ASSERT_TRUE((*lib)->Discover().ok());
  const std::string file = std::string(NVDRA_FAKE_NVML_ROOT) + "/usr/lib64/libnvidia-ml.so.1";
  char real[PATH_MAX];
  ASSERT_NE(::realpath(file.c_str(), real), nullptr);
  EXPECT_TRUE(Mapped(real));

  (*lib)->ReleaseDriver();
  EXPECT_FALSE(Mapped(real));
  auto gone = (*lib)->Discover();
  ASSERT_FALSE(gone.ok());
  EXPECT_TRUE(gone.status().retryable());
  EXPECT_NE(gone.status().message().find("Uninitialized"), std::string::npos) << gone.status().ToString();
  EXPECT_FALSE((*lib)->control().MigModeEnabled("GPU-11111111-2222-3333-4444-555555555555").ok());

  json cfg = BaseConfig();
  cfg["driverVersion"] = "580.65.06";
  Use(cfg);
  ASSERT_TRUE((*lib)->AcquireDriver().ok());
  EXPECT_TRUE(Mapped(real));
  auto back = (*lib)->Discover();
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->driver_version, "580.65.06");
  EXPECT_EQ(back->gpus.size(), 2u);
}

// A call made inside a Session never meets an unloaded library: Unload on
// another thread waits until the Session ends.
TEST_F(NvmlDeviceLibTest, UnloadWaitsForTheSessionsThatAreOpen) {
  auto lib = NvmlLibrary::Load(std::string(NVDRA_FAKE_NVML_ROOT) + "/usr/lib64/libnvidia-ml.so.1");
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  auto session = (*lib)->Open();
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  std::atomic<bool> unloading{false};
  std::thread unloader([&] {
    unloading = true;
    (*lib)->Unload();
  });
  while (!unloading) std::this_thread::yield();
  // However far the unloader got, every call of the open session answers.
  for (int i = 0; i < 2000; ++i) {
    char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
    ASSERT_EQ((*lib)->api().SystemGetDriverVersion(buf, sizeof buf), NVML_SUCCESS) << "call " << i;
  }
  EXPECT_TRUE((*lib)->loaded());
  { auto done = std::move(session).value(); }
  unloader.join();
  EXPECT_FALSE((*lib)->loaded());
  EXPECT_FALSE((*lib)->Open().ok());
}

TEST_F(NvmlDeviceLibTest, InitFailureIsRetryableNotEmpty) {
  json cfg = BaseConfig();
  cfg["initError"] = 9;  // NVML_ERROR_DRIVER_NOT_LOADED
  Use(cfg);
  auto lib = NvmlDeviceLib::Open(Options());
  ASSERT_TRUE(lib.ok());
  auto inv = (*lib)->Discover();
  ASSERT_FALSE(inv.ok());
  EXPECT_TRUE(inv.status().retryable());
  EXPECT_NE(inv.status().message().find("Driver Not Loaded"), std::string::npos) << inv.status().ToString();
  // The driver comes up: the same lib now discovers.
  Use(BaseConfig());
  EXPECT_TRUE((*lib)->Discover().ok());
}

TEST_F(NvmlDeviceLibTest, CallErrorNamesTheCallAndShutsDown) {
  json cfg = BaseConfig();
  cfg["errors"] = {{"nvmlDeviceGetName", 999}};
  Use(cfg);
  auto lib = NvmlDeviceLib::Open(Options());
  ASSERT_TRUE(lib.ok());
  auto inv = (*lib)->Discover();
  ASSERT_FALSE(inv.ok());
  EXPECT_NE(inv.status().message().find("nvmlDeviceGetName"), std::string::npos) << inv.status().ToString();
  EXPECT_NE(inv.status().message().find("GPU index 0"), std::string::npos);
  EXPECT_EQ(InitCount(**lib), 0);
}

TEST_F(NvmlDeviceLibTest, UnsupportedOptionalDataIsLeftOut) {
  json cfg = BaseConfig();
  cfg["devices"][0].erase("memoryTotal");
  cfg["devices"][0].erase("migMode");
  cfg["devices"][0].erase("fabric");
  cfg["devices"].erase(1);
  Use(cfg);
  auto lib = NvmlDeviceLib::Open(Options());
  ASSERT_TRUE(lib.ok());
  auto inv = (*lib)->Discover();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_FALSE(inv->gpus[0].memory_bytes.has_value());
  EXPECT_FALSE(inv->gpus[0].mig_enabled);
  EXPECT_EQ(inv->clique_id, "");
}

TEST_F(NvmlDeviceLibTest, CliqueDisagreementAndFabricNotReady) {
  json cfg = BaseConfig();
  cfg["devices"][1]["fabric"]["cliqueId"] = 8;
  Use(cfg);
  auto lib = NvmlDeviceLib::Open(Options());
  ASSERT_TRUE(lib.ok());
  auto inv = (*lib)->Discover();
  EXPECT_EQ(inv.status().code(), StatusCode::kFailedPrecondition);
  cfg = BaseConfig();
  cfg["devices"][1]["fabric"]["state"] = 2;  // in progress
  Use(cfg);
  // A fabric that is not up is reported, not an error: whether it is fatal
  // is the ComputeDomain plugin's policy. The node has no clique meanwhile.
  inv = (*lib)->Discover();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->clique_id, "");
  ASSERT_TRUE(inv->gpus[1].fabric.has_value());
  EXPECT_FALSE(inv->gpus[1].fabric->completed);
  EXPECT_TRUE(inv->gpus[1].fabric->healthy);
  EXPECT_EQ(inv->gpus[1].fabric->cluster_uuid, "5e2c8a14-7d3b-4f9e-a1c6-0b8d2f4e6a90");
  EXPECT_EQ(inv->gpus[1].clique_id, "");
  EXPECT_EQ(inv->gpus[0].clique_id, "5e2c8a14-7d3b-4f9e-a1c6-0b8d2f4e6a90.7");
}

TEST_F(NvmlDeviceLibTest, NoGpusButDeviceNodesIsUnavailable) {
  // A driver root with the fake library and a /dev/nvidia0 node.
  ASSERT_TRUE(MakeDirectories(dir_.path() + "/drv/usr/lib64").ok());
  ASSERT_TRUE(MakeDirectories(dir_.path() + "/drv/dev").ok());
  ASSERT_TRUE(WriteFileAtomically(dir_.path() + "/drv/dev/nvidiactl", "").ok());
  ASSERT_EQ(::symlink((std::string(NVDRA_FAKE_NVML_ROOT) + "/usr/lib64/libnvidia-ml.so.1").c_str(),
                      (dir_.path() + "/drv/usr/lib64/libnvidia-ml.so.1").c_str()),
            0);
  json cfg = BaseConfig();
  cfg["devices"] = json::array();
  Use(cfg);
  auto lib = NvmlDeviceLib::Open(Options(dir_.path() + "/drv"));
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  auto inv = (*lib)->Discover();
  ASSERT_TRUE(inv.ok()) << "no GPUs and no nodes: an honest empty node";
  EXPECT_TRUE(inv->gpus.empty());
  ASSERT_TRUE(WriteFileAtomically(dir_.path() + "/drv/dev/nvidia0", "").ok());
  inv = (*lib)->Discover();
  EXPECT_EQ(inv.status().code(), StatusCode::kUnavailable) << "never publish zero devices as truth";
}

TEST_F(NvmlDeviceLibTest, XidWatcherReportsCriticalIgnoredLostAndUnmonitored) {
  json cfg = BaseConfig();
  cfg["devices"][0]["registerError"] = 0;
  cfg["events"] = json::parse(R"([
    {"device": 0, "type": 8, "xid": 79},
    {"device": 0, "type": 8, "xid": 13},
    {"device": 1, "type": 8, "xid": 48, "gi": 9, "ci": 0},
    {"device": 1, "type": 8, "xid": 94},
    {"device": 0, "type": 2, "xid": 0},
    {"error": 15}
  ])");
  Use(cfg);
  DeviceLibOptions o = Options();
  o.additional_xids_to_ignore = "94";
  auto lib = NvmlDeviceLib::Open(o);
  ASSERT_TRUE(lib.ok());
  auto inv = (*lib)->Discover();
  ASSERT_TRUE(inv.ok());
  XidWatcher w(&(*lib)->library(), *XidPolicy::WithAdditional("94"));
  std::vector<DeviceHealthEvent> got;
  ASSERT_TRUE(w.Register(*inv, [&](const DeviceHealthEvent& e) { got.push_back(e); }).ok());
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(w.PollOnce(0));
  w.Stop();
  EXPECT_EQ(InitCount(**lib), 0);
  std::vector<std::string> summary;
  for (const auto& e : got) summary.push_back(e.device + " " + HealthStateName(e.state) + " " + e.message);
  EXPECT_EQ(summary, (std::vector<std::string>{
                         "gpu-0 Unhealthy XID 79 (critical)",
                         "gpu-0 Notice XID 13 (ignored)",
                         "gpu-1-mig-1g10gb-19-6 Unhealthy XID 48 (critical)",
                         "gpu-1-mig-1c3g40gb-9-4 Notice XID 94 (ignored)",
                         "gpu-1-mig-1g10gb-19-6 Notice XID 94 (ignored)",
                         "gpu-0 Unhealthy GPU lost",
                         "gpu-1-mig-1c3g40gb-9-4 Unhealthy GPU lost",
                         "gpu-1-mig-1g10gb-19-6 Unhealthy GPU lost",
                     }));
}

TEST_F(NvmlDeviceLibTest, XidWatcherMarksUnregistrableGpuUnmonitored) {
  json cfg = BaseConfig();
  cfg["devices"][0]["registerError"] = 3;
  Use(cfg);
  auto lib = NvmlDeviceLib::Open(Options());
  ASSERT_TRUE(lib.ok());
  auto inv = (*lib)->Discover();
  ASSERT_TRUE(inv.ok());
  auto source = (*lib)->NewHealthSource();
  std::vector<DeviceHealthEvent> got;
  Mutex mu;
  ASSERT_TRUE(source
                  ->Start(*inv,
                          [&](const DeviceHealthEvent& e) {
                            MutexLock l(mu);
                            got.push_back(e);
                          })
                  .ok());
  source->Stop();
  MutexLock l(mu);
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got[0].device, "gpu-0");
  EXPECT_EQ(got[0].state, HealthState::kUnmonitored);
}

// An H100 with MIG mode off whose GPU instance profiles list placements.
json DynamicMigConfig() {
  return json::parse(R"({
    "driverVersion": "570.158.01",
    "cudaDriverVersion": 12080,
    "devices": [
      {"minor": 0, "uuid": "GPU-11111111-2222-3333-4444-555555555555", "name": "NVIDIA H100 80GB HBM3",
       "brand": 14, "arch": 9, "cc": [9, 0], "busId": "00000000:3B:00.0", "memoryTotal": 85520809984,
       "migMode": 0,
       "giProfiles": [
         {"index": 0, "id": 19, "slices": 1, "sms": 16, "ce": 1, "dec": 1, "enc": 0, "jpeg": 1, "ofa": 0,
          "memoryMB": 9984, "name": "MIG 1g.10gb",
          "placements": [[0, 1], [1, 1], [2, 1], [3, 1], [4, 1], [5, 1], [6, 1]]},
         {"index": 1, "id": 14, "slices": 2, "sms": 32, "ce": 2, "dec": 2, "enc": 0, "jpeg": 2, "ofa": 0,
          "memoryMB": 20096, "name": "MIG 2g.20gb", "placements": [[0, 2], [2, 2], [4, 2]]},
         {"index": 4, "id": 0, "slices": 7, "sms": 132, "ce": 8, "dec": 7, "enc": 0, "jpeg": 7, "ofa": 1,
          "memoryMB": 80896, "name": "MIG 7g.80gb", "placements": [[0, 8]]}]}
    ]
  })");
}

TEST_F(NvmlDeviceLibTest, DiscoversMigProfilesAndPlacementsWithMigModeOff) {
  Use(DynamicMigConfig());
  auto lib = NvmlDeviceLib::Open(Options());
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  auto inv = (*lib)->Discover();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  const GpuInfo& g = inv->gpus.at(0);
  EXPECT_FALSE(g.mig_enabled);
  ASSERT_EQ(g.mig_profiles.size(), 3u);
  EXPECT_EQ(g.mig_profiles[0].profile, "1g.10gb");
  EXPECT_EQ(g.mig_profiles[0].gi_profile_id, 19);
  EXPECT_EQ(g.mig_profiles[0].ci_profile_id, 0);
  EXPECT_EQ(g.mig_profiles[0].multiprocessors, 16);
  EXPECT_EQ(g.mig_profiles[0].memory_bytes, 9984ULL << 20);
  EXPECT_EQ(g.mig_profiles[0].placements.size(), 7u);
  EXPECT_EQ(g.mig_profiles[1].profile, "2g.20gb");
  EXPECT_EQ(g.mig_profiles[1].ci_profile_id, 1);
  EXPECT_EQ(g.mig_profiles[1].placements, (std::vector<MigPlacement>{{0, 2}, {2, 2}, {4, 2}}));
  EXPECT_EQ(g.mig_profiles[2].profile, "7g.80gb");
  EXPECT_EQ(g.mig_profiles[2].ci_profile_id, 4) << "NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE";
  EXPECT_EQ(g.mig_profiles[2].placements, (std::vector<MigPlacement>{{0, 8}}));
  EXPECT_EQ(MemorySliceCount(g), 8);
  EXPECT_TRUE(DynamicMigCapable(g));
  EXPECT_EQ(InitCount(**lib), 0);
}

TEST_F(NvmlDeviceLibTest, PersistenceModeComesBackOnThroughNvmlAndIsLeftAloneWhenOn) {
  const std::string gpu = "GPU-11111111-2222-3333-4444-555555555555";
  json cfg = DynamicMigConfig();
  // Already on: nothing is set, so a failing set call is never reached.
  cfg["errors"] = {{"nvmlDeviceSetPersistenceMode", 3}};
  Use(cfg);
  {
    auto lib = NvmlDeviceLib::Open(Options());
    ASSERT_TRUE(lib.ok()) << lib.status().ToString();
    Status s = (*lib)->control().SetPersistenceMode(gpu, true);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  // Off: the set call is made (and its failure reported).
  cfg["devices"][0]["persistenceMode"] = 0;
  Use(cfg);
  {
    auto lib = NvmlDeviceLib::Open(Options());
    ASSERT_TRUE(lib.ok()) << lib.status().ToString();
    Status s = (*lib)->control().SetPersistenceMode(gpu, true);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("nvmlDeviceSetPersistenceMode"), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find(gpu), std::string::npos) << s.ToString();
  }
  cfg.erase("errors");
  Use(cfg);
  auto lib = NvmlDeviceLib::Open(Options());
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  Status s = (*lib)->control().SetPersistenceMode(gpu, true);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ((*lib)->control().SetPersistenceMode("GPU-nope", true).code(), StatusCode::kNotFound);
}

TEST_F(NvmlDeviceLibTest, CreatesAndDestroysMigDevicesThroughNvml) {
  Use(DynamicMigConfig());
  auto lib = NvmlDeviceLib::Open(Options());
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  GpuControl& c = (*lib)->control();
  const std::string gpu = "GPU-11111111-2222-3333-4444-555555555555";
  auto on = c.MigModeEnabled(gpu);
  ASSERT_TRUE(on.ok()) << on.status().ToString();
  EXPECT_FALSE(*on);
  EXPECT_FALSE(c.CreateMigInstance(gpu, 19, 0, 0).ok()) << "no GPU instance with MIG mode off";
  auto none = c.ListMigInstances(gpu);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(c.MigModeEnabled("GPU-nope").status().code(), StatusCode::kNotFound);

  ASSERT_TRUE(c.SetMigMode(gpu, true).ok());
  EXPECT_TRUE(*c.MigModeEnabled(gpu)) << "MIG mode outlives the NVML session";
  auto a = c.CreateMigInstance(gpu, 14, 1, 2);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->gi_profile_id, 14);
  EXPECT_EQ(a->ci_profile_id, 1);
  EXPECT_EQ(a->placement_start, 2);
  EXPECT_EQ(a->placement_size, 2);
  EXPECT_EQ(a->gi_id, 1);
  EXPECT_EQ(a->ci_id, 0);
  EXPECT_TRUE(a->uuid.starts_with("MIG-")) << a->uuid;
  // Overlapping placements are refused, a neighbour is created.
  auto overlap = c.CreateMigInstance(gpu, 19, 0, 3);
  EXPECT_EQ(overlap.status().code(), StatusCode::kAlreadyExists) << overlap.status().ToString();
  EXPECT_EQ(c.CreateMigInstance(gpu, 0, 4, 0).status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(c.CreateMigInstance(gpu, 19, 0, 7).status().code(), StatusCode::kInvalidArgument)
      << "not a placement NVML lists";
  auto b = c.CreateMigInstance(gpu, 19, 0, 0);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->gi_id, 2);
  EXPECT_NE(b->uuid, a->uuid);

  auto list = c.ListMigInstances(gpu);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(*list, (std::vector<MigInstance>{*b, *a})) << "listed by GPU instance profile";
  // Discovery sees them as MIG devices.
  auto inv = (*lib)->Discover();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_TRUE(inv->gpus[0].mig_enabled);
  ASSERT_EQ(inv->gpus[0].migs.size(), 2u);
  EXPECT_EQ(inv->gpus[0].migs[0].uuid, a->uuid);
  EXPECT_EQ(inv->gpus[0].migs[0].profile, "2g.20gb");
  EXPECT_EQ(inv->gpus[0].migs[1].uuid, b->uuid);

  EXPECT_FALSE(c.SetMigMode(gpu, false).ok()) << "MIG mode stays on while MIG devices exist";
  ASSERT_TRUE(c.DestroyMigInstance(gpu, a->gi_id, a->ci_id).ok());
  EXPECT_EQ(c.DestroyMigInstance(gpu, a->gi_id, a->ci_id).code(), StatusCode::kNotFound);
  ASSERT_TRUE(c.DestroyMigInstance(gpu, b->gi_id, b->ci_id).ok());
  EXPECT_TRUE(c.ListMigInstances(gpu)->empty());
  ASSERT_TRUE(c.SetMigMode(gpu, false).ok());
  EXPECT_FALSE(*c.MigModeEnabled(gpu));
  EXPECT_EQ(c.DestroyMigInstance(gpu, 1, 0).code(), StatusCode::kNotFound) << "MIG mode off: nothing exists";
  EXPECT_EQ(InitCount(**lib), 0) << "every call closes its NVML session";
}

TEST_F(NvmlDeviceLibTest, AGpuInstanceWithoutComputeInstanceIsListedAndDestroyed) {
  json cfg = DynamicMigConfig();
  cfg["devices"][0]["migMode"] = 1;
  cfg["devices"][0]["migs"] = json::parse(R"([{"gi": 5, "giProfileId": 19, "placement": [3, 1],
                                               "noComputeInstance": true}])");
  Use(cfg);
  auto lib = NvmlDeviceLib::Open(Options());
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  GpuControl& c = (*lib)->control();
  const std::string gpu = "GPU-11111111-2222-3333-4444-555555555555";
  auto list = c.ListMigInstances(gpu);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].gi_id, 5);
  EXPECT_EQ((*list)[0].ci_id, -1);
  EXPECT_EQ((*list)[0].uuid, "");
  EXPECT_EQ((*list)[0].placement_start, 3);
  ASSERT_TRUE(c.DestroyMigInstance(gpu, 5, -1).ok());
  EXPECT_TRUE(c.ListMigInstances(gpu)->empty());
}

TEST_F(NvmlDeviceLibTest, AFailedComputeInstanceTakesItsGpuInstanceWithIt) {
  json cfg = DynamicMigConfig();
  cfg["devices"][0]["migMode"] = 1;
  cfg["errors"] = {{"nvmlGpuInstanceCreateComputeInstance", 23}};
  Use(cfg);
  auto lib = NvmlDeviceLib::Open(Options());
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  GpuControl& c = (*lib)->control();
  const std::string gpu = "GPU-11111111-2222-3333-4444-555555555555";
  auto m = c.CreateMigInstance(gpu, 19, 0, 1);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("nvmlGpuInstanceCreateComputeInstance"), std::string::npos)
      << m.status().ToString();
  auto list = c.ListMigInstances(gpu);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_TRUE(list->empty()) << "no GPU instance is left behind";
}

TEST(NvidiaSmiControlTest, RunsUpstreamCommandLines) {
  std::vector<std::string> calls;
  NvidiaSmiControl c("/driver-root/usr/bin/nvidia-smi", "/driver-root/usr/lib64/libnvidia-ml.so.1",
                     [&](const std::vector<std::string>& argv, const std::vector<std::string>& env) {
                       std::string line;
                       for (const auto& a : argv) line += (line.empty() ? "" : " ") + a;
                       calls.push_back(line);
                       EXPECT_EQ(env.size(), 1u);
                       EXPECT_EQ(env[0].rfind("LD_PRELOAD=/driver-root/usr/lib64/libnvidia-ml.so.1", 0), 0u);
                       return Status::Ok();
                     });
  ASSERT_TRUE(c.SetTimeSlice("GPU-1", 2).ok());
  ASSERT_TRUE(c.SetComputeMode("GPU-1", "EXCLUSIVE_PROCESS").ok());
  EXPECT_FALSE(c.SetTimeSlice("GPU-1", 4).ok());
  EXPECT_FALSE(c.SetComputeMode("GPU-1", "SHARED").ok());
  ASSERT_TRUE(c.SetPersistenceMode("GPU-1", false).ok());
  EXPECT_EQ(calls,
            (std::vector<std::string>{"/driver-root/usr/bin/nvidia-smi -i GPU-1 -c DEFAULT",
                                      "/driver-root/usr/bin/nvidia-smi compute-policy -i GPU-1 --set-timeslice 2",
                                      "/driver-root/usr/bin/nvidia-smi -i GPU-1 -c EXCLUSIVE_PROCESS",
                                      "/driver-root/usr/bin/nvidia-smi -i GPU-1 -pm 0"}));
}

TEST(NvidiaSmiControlTest, RunCommandReportsFailureWithOutput) {
  EXPECT_TRUE(RunCommand({"/bin/sh", "-c", "exit 0"}, {}).ok());
  Status s = RunCommand({"/bin/sh", "-c", "echo boom; exit 3"}, {"X=1"});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("exit 3"), std::string::npos);
  EXPECT_NE(s.message().find("boom"), std::string::npos);
  EXPECT_TRUE(RunCommand({"/bin/sh", "-c", "test \"$X\" = 1"}, {"X=1"}).ok());
  EXPECT_FALSE(RunCommand({"/nonexistent/binary"}, {}).ok());
}

// A hung nvidia-smi once hung the claim operation waiting for it: the
// command, and anything it started, is killed at its timeout.
TEST(NvidiaSmiControlTest, RunCommandKillsAHungCommandAtItsTimeout) {
  Status s = RunCommandWithin({"/bin/sh", "-c", "echo started; sleep 1000 & sleep 1000"}, {},
                              std::chrono::milliseconds(300));
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_NE(s.message().find("did not finish within 300 ms and was killed"), std::string::npos) << s.message();
  EXPECT_TRUE(s.retryable());
  // A quick command is unaffected by a timeout.
  EXPECT_TRUE(RunCommandWithin({"/bin/sh", "-c", "exit 0"}, {}, std::chrono::milliseconds(30'000)).ok());
}

TEST(NvmlNamesTest, BrandArchitectureBusIdUuid) {
  EXPECT_EQ(NvmlBrandName(2), "Tesla");
  EXPECT_EQ(NvmlBrandName(14), "Nvidia");
  EXPECT_EQ(NvmlBrandName(99), "Unknown");
  EXPECT_EQ(NvmlArchitectureName(7), "Ampere");
  EXPECT_EQ(NvmlArchitectureName(8), "Ada Lovelace");
  EXPECT_EQ(NvmlArchitectureName(9), "Hopper");
  EXPECT_EQ(NvmlArchitectureName(10), "Blackwell");
  EXPECT_EQ(NormalizePciBusId("00000000:3B:00.0"), "0000:3b:00.0");
  EXPECT_EQ(NormalizePciBusId("00000008:01:00.0"), "0008:01:00.0");
  EXPECT_EQ(NormalizePciBusId("0000:3b:00.0"), "0000:3b:00.0");
  const unsigned char b[16] = {0x5e, 0x2c, 0x8a, 0x14, 0x7d, 0x3b, 0x4f, 0x9e,
                               0xa1, 0xc6, 0x0b, 0x8d, 0x2f, 0x4e, 0x6a, 0x90};
  EXPECT_EQ(FormatUuidBytes(b), "5e2c8a14-7d3b-4f9e-a1c6-0b8d2f4e6a90");
}

}  // namespace
}  // namespace nvdra::devices
