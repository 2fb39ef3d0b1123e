// The libnvfm backend against the fake libnvfm.so built in the test tree:
// dlopen, symbol loading, the partition list's layout, activation and the
// connection options.
#include "devices/nvml/nvfm_fabric_manager.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "util/file_util.h"
#include "util/test_temp_dir.h"

namespace nvdra::devices {
namespace {

using nlohmann::json;

// libnvfm.so through dlopen: the fake answers from a JSON state file.
class NvfmFabricManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_ = tmp_.path() + "/nvfm.json";
    Use(json::parse(R"({"partitions": [
      {"id": 0, "active": false, "gpus": [{"physicalId": 1, "uuid": "GPU-a", "pciBusId": "00000000:18:00.0"},
                                          {"physicalId": 2, "uuid": "GPU-b", "pciBusId": "00000000:2A:00.0"}]},
      {"id": 1, "active": true, "gpus": [{"physicalId": 1, "uuid": "GPU-a", "pciBusId": "00000000:18:00.0"}]}]})"));
    ::setenv("FAKE_NVFM_STATE", state_.c_str(), 1);
  }
  void TearDown() override { ::unsetenv("FAKE_NVFM_STATE"); }
  void Use(const json& j) { ASSERT_TRUE(WriteFileAtomically(state_, j.dump(), 0644, false).ok()); }
  json State() { return json::parse(*ReadFileToString(state_)); }
  Result<std::unique_ptr<NvfmFabricManager>> Load() {
    return NvfmFabricManager::Load(std::string(NVDRA_FAKE_NVML_ROOT) + "/usr/lib64/libnvfm.so",
                                   {tmp_.path() + "/socket", true, 1000});
  }
  ::nvdra::testing::TempDir tmp_{"nvdra-nvfm"};
  std::string state_;
};

TEST_F(NvfmFabricManagerTest, ListsActivatesAndDeactivatesThroughTheLibrary) {
  auto fm = Load();
  ASSERT_TRUE(fm.ok()) << fm.status().ToString();
  auto parts = (*fm)->Partitions();
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0].id, 0);
  EXPECT_FALSE((*parts)[0].active);
  EXPECT_EQ((*parts)[0].ModuleIds(), (std::vector<int>{1, 2}));
  EXPECT_EQ((*parts)[0].gpus[1].uuid, "GPU-b");
  EXPECT_EQ((*parts)[0].gpus[1].pci_bus_id, "00000000:2A:00.0");
  EXPECT_TRUE((*parts)[1].active);
  ASSERT_TRUE((*fm)->Deactivate(1).ok());
  ASSERT_TRUE((*fm)->Activate(0).ok());
  EXPECT_EQ(State()["calls"], json::parse(R"(["fmDeactivateFabricPartition 1", "fmActivateFabricPartition 0"])"));
  // Fabric Manager's own refusal, named as go-nvfm names it.
  auto again = (*fm)->Activate(0);
  EXPECT_EQ(again.message(), "fmActivateFabricPartition: IN_USE");
  // Every call closed its connection.
  void* lib = ::dlopen((std::string(NVDRA_FAKE_NVML_ROOT) + "/usr/lib64/libnvfm.so").c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr);
  auto open = reinterpret_cast<int (*)()>(::dlsym(lib, "fakeNvfmOpenConnections"));
  ASSERT_NE(open, nullptr);
  EXPECT_EQ(open(), 0);
  ::dlclose(lib);
}

TEST_F(NvfmFabricManagerTest, ConnectFailuresAndBadCountsAreErrors) {
  auto fm = Load();
  ASSERT_TRUE(fm.ok());
  json j = State();
  j["connectError"] = -5;
  Use(j);
  auto down = (*fm)->Partitions();
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(down.status().message().rfind("fmGetSupportedFabricPartitions: connect failed: fmConnect: TIMEOUT", 0), 0u)
      << down.status().message();
  j.erase("connectError");
  j["numPartitions"] = 65;
  Use(j);
  auto bad = (*fm)->Partitions();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("invalid partition count: FM reported 65"), std::string::npos);
  j.erase("numPartitions");
  j["errors"] = {{"fmDeactivateFabricPartition", -22}};
  Use(j);
  EXPECT_EQ((*fm)->Deactivate(1).code(), StatusCode::kUnavailable) << "NOT_READY is worth a retry";
}

TEST_F(NvfmFabricManagerTest, AMissingLibraryOrSymbolIsAnError) {
  auto missing = NvfmFabricManager::Load(tmp_.path() + "/libnvfm.so", {});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("loading Fabric Manager library"), std::string::npos);
  auto not_fm = NvfmFabricManager::Load(std::string(NVDRA_FAKE_NVML_ROOT) + "/usr/lib64/libnvidia-ml.so.1", {});
  ASSERT_FALSE(not_fm.ok());
  EXPECT_NE(not_fm.status().message().find("lacks required symbols: fmLibInit"), std::string::npos);
}

TEST(NvfmConnectOptionsTest, UpstreamsVariables) {
  auto env = [](std::map<std::string, std::string> vars) {
    return [vars = std::move(vars)](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  };
  auto d = NvfmConnectOptionsFromEnv("/driver-root", env({}));
  EXPECT_TRUE(d.unix_socket);
  EXPECT_EQ(d.address, "/driver-root/run/nvidia-fabricmanager/socket");
  auto s = NvfmConnectOptionsFromEnv("/driver-root", env({{"NVIDIA_FABRICMANAGER_UNIX_SOCKET", "/run/fm.sock"}}));
  EXPECT_EQ(s.address, "/run/fm.sock");
  auto tcp = NvfmConnectOptionsFromEnv("/driver-root", env({{"NVIDIA_FABRICMANAGER_ADDRESS", ""}}));
  EXPECT_FALSE(tcp.unix_socket);
  EXPECT_EQ(tcp.address, "127.0.0.1");
  auto host = NvfmConnectOptionsFromEnv("/driver-root", env({{"NVIDIA_FABRICMANAGER_ADDRESS", "10.0.0.2:6666"},
                                                             {"NVIDIA_FABRICMANAGER_UNIX_SOCKET", "/x"}}));
  EXPECT_FALSE(host.unix_socket);
  EXPECT_EQ(host.address, "10.0.0.2:6666");
  EXPECT_EQ(FmReturnName(-7), "IN_USE");
  EXPECT_EQ(FmReturnName(-24), "RESOURCE_USED_IN_ANOTHER_PARTITION");
  EXPECT_EQ(FmReturnName(-99), "unknown return code -99");
}

}  // namespace
}  // namespace nvdra::devices
