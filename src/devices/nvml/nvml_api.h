// The small part of the NVML C API we use, declared here so the build needs
// no NVIDIA headers. Types and layouts follow the public nvml.h; only
// functions present in every driver since R470 are required, newer ones
// (fabric info, addressing mode) are optional.
#pragma once

#include <cstdint>

extern "C" {

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlGpuInstance_st* nvmlGpuInstance_t;
typedef struct nvmlComputeInstance_st* nvmlComputeInstance_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;

enum : int {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
  NVML_ERROR_UNKNOWN = 999,
};

inline constexpr unsigned NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96;
inline constexpr unsigned NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96;
inline constexpr unsigned NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80;
inline constexpr unsigned NVML_DEVICE_MIG_DISABLE = 0;
inline constexpr unsigned NVML_DEVICE_MIG_ENABLE = 1;
inline constexpr unsigned NVML_GPU_INSTANCE_PROFILE_COUNT = 0x0E;
// Compute instance profiles (NVML_COMPUTE_INSTANCE_PROFILE_<n>_SLICE): the
// profile of a compute instance spanning <n> slices.
inline constexpr unsigned NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE = 0x0;
inline constexpr unsigned NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE = 0x1;
inline constexpr unsigned NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE = 0x2;
inline constexpr unsigned NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE = 0x3;
inline constexpr unsigned NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE = 0x4;
inline constexpr unsigned NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE = 0x5;
inline constexpr unsigned NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE = 0x6;
inline constexpr unsigned NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1 = 0x7;
inline constexpr unsigned NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = 0x0;
inline constexpr unsigned long long nvmlEventTypeSingleBitEccError = 0x1ULL;
inline constexpr unsigned long long nvmlEventTypeDoubleBitEccError = 0x2ULL;
inline constexpr unsigned long long nvmlEventTypeXidCriticalError = 0x8ULL;
inline constexpr unsigned char NVML_GPU_FABRIC_STATE_COMPLETED = 3;
inline constexpr unsigned NVML_INVALID_INSTANCE_ID = 0xFFFFFFFFu;

typedef struct {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;

typedef struct {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct {
  unsigned int start;
  unsigned int size;
} nvmlGpuInstancePlacement_t;

typedef struct {
  nvmlDevice_t device;
  unsigned int id;
  unsigned int profileId;
  nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;

typedef struct {
  unsigned int start;
  unsigned int size;
} nvmlComputeInstancePlacement_t;

typedef struct {
  nvmlDevice_t device;
  nvmlGpuInstance_t gpuInstance;
  unsigned int id;
  unsigned int profileId;
  nvmlComputeInstancePlacement_t placement;
} nvmlComputeInstanceInfo_t;

typedef struct {
  unsigned int version;
  unsigned int id;
  unsigned int isP2pSupported;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int copyEngineCount;
  unsigned int decoderCount;
  unsigned int encoderCount;
  unsigned int jpegCount;
  unsigned int ofaCount;
  unsigned long long memorySizeMB;
  char name[96];
} nvmlGpuInstanceProfileInfo_v2_t;
// NVML_STRUCT_VERSION(GpuInstanceProfileInfo, 2)
inline constexpr unsigned nvmlGpuInstanceProfileInfo_v2 =
    static_cast<unsigned>(sizeof(nvmlGpuInstanceProfileInfo_v2_t) | (2u << 24));

typedef struct {
  unsigned int id;
  unsigned int sliceCount;
  unsigned int instanceCount;
  unsigned int multiprocessorCount;
  unsigned int sharedCopyEngineCount;
  unsigned int sharedDecoderCount;
  unsigned int sharedEncoderCount;
  unsigned int sharedJpegCount;
  unsigned int sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;

typedef struct {
  unsigned char clusterUuid[16];
  nvmlReturn_t status;
  unsigned int cliqueId;
  unsigned char state;
} nvmlGpuFabricInfo_t;

typedef struct {
  unsigned int version;
  unsigned int value;  // 0 None, 1 HMM, 2 ATS
} nvmlDeviceAddressingMode_t;
inline constexpr unsigned nvmlDeviceAddressingMode_v1 = static_cast<unsigned>(sizeof(nvmlDeviceAddressingMode_t) |
                                                                              (1u << 24));

typedef struct {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;

}  // extern "C"

// Layouts as in nvml.h on LP64 (x86_64, aarch64): a mismatch would corrupt
// memory in the real library.
static_assert(sizeof(nvmlPciInfo_t) == 68);
static_assert(sizeof(nvmlMemory_t) == 24);
static_assert(sizeof(nvmlGpuInstanceInfo_t) == 24);
static_assert(sizeof(nvmlComputeInstanceInfo_t) == 32);
static_assert(sizeof(nvmlGpuInstanceProfileInfo_v2_t) == 152);
static_assert(sizeof(nvmlComputeInstanceProfileInfo_t) == 36);
static_assert(sizeof(nvmlGpuInstancePlacement_t) == 8);
static_assert(sizeof(nvmlGpuFabricInfo_t) == 28);
static_assert(sizeof(nvmlDeviceAddressingMode_t) == 8);
static_assert(sizeof(nvmlEventData_t) == 32);

namespace nvdra::devices {

// Function pointers resolved from the loaded library. Optional ones may be
// null.
struct NvmlApi {
  nvmlReturn_t (*Init)();
  nvmlReturn_t (*Shutdown)();
  const char* (*ErrorString)(nvmlReturn_t);
  nvmlReturn_t (*SystemGetDriverVersion)(char*, unsigned);
  nvmlReturn_t (*SystemGetCudaDriverVersion)(int*);
  nvmlReturn_t (*DeviceGetCount)(unsigned*);
  nvmlReturn_t (*DeviceGetHandleByIndex)(unsigned, nvmlDevice_t*);
  nvmlReturn_t (*DeviceGetMinorNumber)(nvmlDevice_t, unsigned*);
  nvmlReturn_t (*DeviceGetUUID)(nvmlDevice_t, char*, unsigned);
  nvmlReturn_t (*DeviceGetName)(nvmlDevice_t, char*, unsigned);
  nvmlReturn_t (*DeviceGetBrand)(nvmlDevice_t, int*);
  nvmlReturn_t (*DeviceGetArchitecture)(nvmlDevice_t, unsigned*);
  nvmlReturn_t (*DeviceGetCudaComputeCapability)(nvmlDevice_t, int*, int*);
  nvmlReturn_t (*DeviceGetPciInfo)(nvmlDevice_t, nvmlPciInfo_t*);
  nvmlReturn_t (*DeviceGetMemoryInfo)(nvmlDevice_t, nvmlMemory_t*);
  nvmlReturn_t (*DeviceGetMigMode)(nvmlDevice_t, unsigned*, unsigned*);
  nvmlReturn_t (*DeviceGetMaxMigDeviceCount)(nvmlDevice_t, unsigned*);
  nvmlReturn_t (*DeviceGetMigDeviceHandleByIndex)(nvmlDevice_t, unsigned, nvmlDevice_t*);
  nvmlReturn_t (*DeviceGetGpuInstanceId)(nvmlDevice_t, unsigned*);
  nvmlReturn_t (*DeviceGetComputeInstanceId)(nvmlDevice_t, unsigned*);
  nvmlReturn_t (*DeviceGetGpuInstanceById)(nvmlDevice_t, unsigned, nvmlGpuInstance_t*);
  nvmlReturn_t (*GpuInstanceGetInfo)(nvmlGpuInstance_t, nvmlGpuInstanceInfo_t*);
  nvmlReturn_t (*GpuInstanceGetComputeInstanceById)(nvmlGpuInstance_t, unsigned, nvmlComputeInstance_t*);
  nvmlReturn_t (*ComputeInstanceGetInfo)(nvmlComputeInstance_t, nvmlComputeInstanceInfo_t*);
  nvmlReturn_t (*DeviceGetGpuInstanceProfileInfoV)(nvmlDevice_t, unsigned, nvmlGpuInstanceProfileInfo_v2_t*);
  // Dynamic MIG (present since R450).
  nvmlReturn_t (*DeviceGetHandleByUUID)(const char*, nvmlDevice_t*);
  nvmlReturn_t (*DeviceSetMigMode)(nvmlDevice_t, unsigned, nvmlReturn_t*);
  nvmlReturn_t (*DeviceGetGpuInstancePossiblePlacements)(nvmlDevice_t, unsigned, nvmlGpuInstancePlacement_t*,
                                                         unsigned*);
  nvmlReturn_t (*DeviceCreateGpuInstanceWithPlacement)(nvmlDevice_t, unsigned, const nvmlGpuInstancePlacement_t*,
                                                       nvmlGpuInstance_t*);
  nvmlReturn_t (*DeviceGetGpuInstances)(nvmlDevice_t, unsigned, nvmlGpuInstance_t*, unsigned*);
  nvmlReturn_t (*GpuInstanceGetComputeInstanceProfileInfo)(nvmlGpuInstance_t, unsigned, unsigned,
                                                           nvmlComputeInstanceProfileInfo_t*);
  nvmlReturn_t (*GpuInstanceCreateComputeInstance)(nvmlGpuInstance_t, unsigned, nvmlComputeInstance_t*);
  nvmlReturn_t (*GpuInstanceGetComputeInstances)(nvmlGpuInstance_t, unsigned, nvmlComputeInstance_t*, unsigned*);
  nvmlReturn_t (*ComputeInstanceDestroy)(nvmlComputeInstance_t);
  nvmlReturn_t (*GpuInstanceDestroy)(nvmlGpuInstance_t);
  nvmlReturn_t (*EventSetCreate)(nvmlEventSet_t*);
  nvmlReturn_t (*EventSetFree)(nvmlEventSet_t);
  nvmlReturn_t (*EventSetWait)(nvmlEventSet_t, nvmlEventData_t*, unsigned);
  nvmlReturn_t (*DeviceRegisterEvents)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
  nvmlReturn_t (*DeviceGetSupportedEventTypes)(nvmlDevice_t, unsigned long long*);
  // Optional.
  nvmlReturn_t (*DeviceGetGpuFabricInfo)(nvmlDevice_t, nvmlGpuFabricInfo_t*);
  nvmlReturn_t (*DeviceGetAddressingMode)(nvmlDevice_t, nvmlDeviceAddressingMode_t*);
  // Persistence mode (nvmlEnableState_t: 0 disabled, 1 enabled).
  nvmlReturn_t (*DeviceGetPersistenceMode)(nvmlDevice_t, int*);
  nvmlReturn_t (*DeviceSetPersistenceMode)(nvmlDevice_t, int);
  nvmlReturn_t (*DeviceGetModuleId)(nvmlDevice_t, unsigned int*);
};

}  // namespace nvdra::devices
