// A stand-in libnvfm.so for tests: exports the Fabric Manager calls nvdra
// uses and answers from a JSON file named by $FAKE_NVFM_STATE, which it
// also writes back when a partition is activated or deactivated, so the
// state outlives the process as Fabric Manager's does:
//   {"partitions": [{"id": 0, "active": false,
//                    "gpus": [{"physicalId": 1, "uuid": "GPU-...", "pciBusId": "0000:18:00.0"}]}],
//    "connectError": 0,        // non-zero: fmConnect returns it
//    "errors": {"fmActivateFabricPartition": -7},  // force a return code for a call
//    "numPartitions": 65,      // reported instead of the list's length (layout checks)
//    "calls": ["fmActivateFabricPartition 3", ...]}  // appended by every call that changes state
// Like Fabric Manager, activating an active partition answers
// FM_ST_IN_USE and deactivating an inactive one FM_ST_UNINITIALIZED.
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "devices/nvml/nvfm_api.h"

using nlohmann::json;

namespace {

std::mutex mu;
int init_count = 0;
int connections = 0;
int handle_tag = 42;

bool Read(json& out) {
  const char* path = std::getenv("FAKE_NVFM_STATE");
  if (path == nullptr) return false;
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    out = json::parse(ss.str());
  } catch (const json::exception&) {
    return false;
  }
  return true;
}

void Write(const json& state) {
  const char* path = std::getenv("FAKE_NVFM_STATE");
  if (path == nullptr) return;
  std::ofstream(path) << state.dump();
}

fmReturn_t Forced(const json& state, const char* call) {
  if (state.contains("errors") && state["errors"].contains(call)) return state["errors"][call].get<int>();
  return FM_ST_SUCCESS;
}

bool Valid(fmHandle_t h) { return h == &handle_tag; }

fmReturn_t SetActive(fmHandle_t h, fmFabricPartitionId_t id, bool active, const char* call) {
  std::lock_guard<std::mutex> l(mu);
  if (!Valid(h)) return FM_ST_BADPARAM;
  json state;
  if (!Read(state)) return FM_ST_GENERIC_ERROR;
  if (fmReturn_t rc = Forced(state, call); rc != FM_ST_SUCCESS) return rc;
  for (auto& p : state["partitions"]) {
    if (p["id"].get<unsigned>() != id) continue;
    if (p.value("active", false) == active) return active ? FM_ST_IN_USE : FM_ST_UNINITIALIZED;
    p["active"] = active;
    state["calls"].push_back(std::string(call) + " " + std::to_string(id));
    Write(state);
    return FM_ST_SUCCESS;
  }
  return -18;  // FM_ST_PARTITION_ID_NOT_IN_USE
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int fakeNvfmInitCount() { return init_count; }
__attribute__((visibility("default"))) int fakeNvfmOpenConnections() { return connections; }

fmReturn_t fmLibInit() {
  std::lock_guard<std::mutex> l(mu);
  ++init_count;
  return FM_ST_SUCCESS;
}

fmReturn_t fmLibShutdown() {
  std::lock_guard<std::mutex> l(mu);
  if (init_count == 0) return FM_ST_UNINITIALIZED;
  --init_count;
  return FM_ST_SUCCESS;
}

fmReturn_t fmConnect(fmConnectParams_t* params, fmHandle_t* handle) {
  std::lock_guard<std::mutex> l(mu);
  if (init_count == 0) return FM_ST_UNINITIALIZED;
  if (params == nullptr || handle == nullptr || params->version != fmConnectParams_version) return FM_ST_BADPARAM;
  json state;
  if (!Read(state)) return FM_ST_CONNECTION_NOT_VALID;
  if (int rc = state.value("connectError", 0); rc != 0) return rc;
  *handle = &handle_tag;
  ++connections;
  return FM_ST_SUCCESS;
}

fmReturn_t fmDisconnect(fmHandle_t h) {
  std::lock_guard<std::mutex> l(mu);
  if (!Valid(h)) return FM_ST_BADPARAM;
  --connections;
  return FM_ST_SUCCESS;
}

fmReturn_t fmGetSupportedFabricPartitions(fmHandle_t h, fmFabricPartitionList_t* list) {
  std::lock_guard<std::mutex> l(mu);
  if (!Valid(h) || list == nullptr || list->version != fmFabricPartitionList_version) return FM_ST_BADPARAM;
  json state;
  if (!Read(state)) return FM_ST_GENERIC_ERROR;
  if (fmReturn_t rc = Forced(state, "fmGetSupportedFabricPartitions"); rc != FM_ST_SUCCESS) return rc;
  const json& parts = state["partitions"];
  list->numPartitions = state.value("numPartitions", static_cast<unsigned>(parts.size()));
  list->maxNumPartitions = FM_MAX_FABRIC_PARTITIONS;
  for (size_t i = 0; i < parts.size() && i < FM_MAX_FABRIC_PARTITIONS; ++i) {
    fmFabricPartitionInfo_t& p = list->partitionInfo[i];
    p.partitionId = parts[i]["id"].get<unsigned>();
    p.isActive = parts[i].value("active", false) ? 1 : 0;
    const json& gpus = parts[i]["gpus"];
    p.numGpus = static_cast<unsigned>(gpus.size());
    for (size_t g = 0; g < gpus.size() && g < FM_MAX_NUM_GPUS; ++g) {
      p.gpuInfo[g].physicalId = gpus[g]["physicalId"].get<unsigned>();
      std::strncpy(p.gpuInfo[g].uuid, gpus[g].value("uuid", "").c_str(), FM_UUID_BUFFER_SIZE - 1);
      std::strncpy(p.gpuInfo[g].pciBusId, gpus[g].value("pciBusId", "").c_str(), FM_DEVICE_PCI_BUS_ID_BUFFER_SIZE - 1);
    }
  }
  return FM_ST_SUCCESS;
}

fmReturn_t fmActivateFabricPartition(fmHandle_t h, fmFabricPartitionId_t id) {
  return SetActive(h, id, true, "fmActivateFabricPartition");
}

fmReturn_t fmDeactivateFabricPartition(fmHandle_t h, fmFabricPartitionId_t id) {
  return SetActive(h, id, false, "fmDeactivateFabricPartition");
}

}  // extern "C"
