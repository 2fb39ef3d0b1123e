// The small part of the Fabric Manager API interface library (libnvfm.so)
// the partition calls use, declared here so the build needs no NVIDIA
// headers. Layouts follow the public nv_fm_types.h of the Fabric Manager
// SDK; version words are MAKE_FM_PARAM_VERSION(type, ver) =
// sizeof(type) | ver << 24.
#pragma once

extern "C" {

typedef int fmReturn_t;
typedef void* fmHandle_t;
typedef unsigned int fmFabricPartitionId_t;

enum : int {
  FM_ST_SUCCESS = 0,
  FM_ST_BADPARAM = -1,
  FM_ST_GENERIC_ERROR = -2,
  FM_ST_NOT_SUPPORTED = -3,
  FM_ST_UNINITIALIZED = -4,
  FM_ST_TIMEOUT = -5,
  FM_ST_VERSION_MISMATCH = -6,
  FM_ST_IN_USE = -7,
  FM_ST_NOT_CONFIGURED = -8,
  FM_ST_CONNECTION_NOT_VALID = -9,
  FM_ST_NVLINK_ERROR = -10,
  FM_ST_NOT_READY = -22,
};

inline constexpr unsigned FM_MAX_STR_LENGTH = 256;
inline constexpr unsigned FM_UUID_BUFFER_SIZE = 80;
inline constexpr unsigned FM_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32;
inline constexpr unsigned FM_MAX_NUM_GPUS = 16;
inline constexpr unsigned FM_MAX_FABRIC_PARTITIONS = 64;
inline constexpr unsigned NV_FM_API_ADDR_TYPE_INET = 1;
inline constexpr unsigned NV_FM_API_ADDR_TYPE_UNIX = 2;

// fmConnectParams_v2.
typedef struct {
  unsigned int version;
  char addressInfo[FM_MAX_STR_LENGTH];  // "<ip>[:<port>]" or a unix socket path
  unsigned int timeoutMs;
  unsigned int addressIsUnixSocket;  // deprecated by addressType, still set
  unsigned int addressType;          // NV_FM_API_ADDR_TYPE_*
} fmConnectParams_t;
inline constexpr unsigned fmConnectParams_version = static_cast<unsigned>(sizeof(fmConnectParams_t) | (2u << 24));

typedef struct {
  unsigned int physicalId;  // the GPU's module id
  char uuid[FM_UUID_BUFFER_SIZE];
  char pciBusId[FM_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
  unsigned int numNvLinksAvailable;
  unsigned int maxNumNvLinks;
  unsigned int nvlinkLineRateMBps;
} fmFabricPartitionGpuInfo_t;

typedef struct {
  fmFabricPartitionId_t partitionId;
  unsigned int isActive;
  unsigned int numGpus;
  fmFabricPartitionGpuInfo_t gpuInfo[FM_MAX_NUM_GPUS];
} fmFabricPartitionInfo_t;

// fmFabricPartitionList_v2 (version word 1).
typedef struct {
  unsigned int version;
  unsigned int numPartitions;
  unsigned int maxNumPartitions;
  fmFabricPartitionInfo_t partitionInfo[FM_MAX_FABRIC_PARTITIONS];
} fmFabricPartitionList_t;
inline constexpr unsigned fmFabricPartitionList_version = static_cast<unsigned>(sizeof(fmFabricPartitionList_t) |
                                                                                (1u << 24));

static_assert(sizeof(fmConnectParams_t) == 272);
static_assert(sizeof(fmFabricPartitionGpuInfo_t) == 128);
static_assert(sizeof(fmFabricPartitionInfo_t) == 12 + 16 * 128);

}  // extern "C"

namespace nvdra::devices {

// The functions resolved from libnvfm.so; all are required.
struct NvfmApi {
  fmReturn_t (*LibInit)();
  fmReturn_t (*LibShutdown)();
  fmReturn_t (*Connect)(fmConnectParams_t*, fmHandle_t*);
  fmReturn_t (*Disconnect)(fmHandle_t);
  fmReturn_t (*GetSupportedFabricPartitions)(fmHandle_t, fmFabricPartitionList_t*);
  fmReturn_t (*ActivateFabricPartition)(fmHandle_t, fmFabricPartitionId_t);
  fmReturn_t (*DeactivateFabricPartition)(fmHandle_t, fmFabricPartitionId_t);
};

}  // namespace nvdra::devices
