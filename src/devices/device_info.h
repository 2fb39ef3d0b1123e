// What hardware discovery reports: the node's GPUs, their existing (static)
// MIG devices and the NVLink clique. Backend-neutral: filled by NVML or by a
// mock profile, consumed by publishing and by the CDI edit helpers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace nvdra::devices {

struct MigDeviceInfo {
  int parent_minor = 0;
  std::string parent_uuid;
  std::string uuid;       // "MIG-..."
  std::string profile;    // "1g.10gb", "1c.2g.20gb", "1g.10gb+me"
  int gi_profile_id = 0;  // NVML GPU-instance profile id (e.g. 19)
  int ci_profile_id = 0;
  int gi_id = 0;
  int ci_id = 0;
  int placement_start = 0;
  int placement_size = 0;
  int multiprocessors = 0;
  int copy_engines = 0;
  int decoders = 0;
  int encoders = 0;
  int jpeg_engines = 0;
  int ofa_engines = 0;
  uint64_t memory_bytes = 0;
  friend bool operator==(const MigDeviceInfo&, const MigDeviceInfo&) = default;
};

// One GPU-instance placement of a MIG profile, in memory slices.
struct MigPlacement {
  int start = 0;
  int size = 0;
  friend bool operator==(const MigPlacement&, const MigPlacement&) = default;
};

// A MIG profile a GPU can create (dynamic MIG), with its possible
// placements: NVML's GPU-instance profile info and possible placements.
// Only profiles whose compute instance spans the whole GPU instance are
// listed (as upstream: "1g.10gb", not "1c.2g.20gb").
struct MigProfileInfo {
  std::string profile;  // "1g.10gb", "1g.10gb+me"
  int gi_profile_id = 0;
  int ci_profile_id = 0;
  int multiprocessors = 0;
  int copy_engines = 0;
  int decoders = 0;
  int encoders = 0;
  int jpeg_engines = 0;
  int ofa_engines = 0;
  uint64_t memory_bytes = 0;
  std::vector<MigPlacement> placements;
  friend bool operator==(const MigProfileInfo&, const MigProfileInfo&) = default;
};

// A GPU's NVLink fabric as nvmlDeviceGetGpuFabricInfo reports it.
struct FabricReading {
  bool supported = true;     // false: NVML_ERROR_NOT_SUPPORTED (no NVLink fabric)
  std::string cluster_uuid;  // formatted; "" when NVML reports all zeroes
  unsigned clique_id = 0;
  bool completed = true;  // state == NVML_GPU_FABRIC_STATE_COMPLETED
  bool healthy = true;    // status == NVML_SUCCESS
  std::string detail;     // state and status as text, for messages
  friend bool operator==(const FabricReading&, const FabricReading&) = default;
};

struct GpuInfo {
  int minor = 0;
  std::string uuid;                      // "GPU-..."
  std::string product_name;              // "NVIDIA H100 80GB HBM3"
  std::string brand;                     // "Nvidia", "Tesla", ...
  std::string architecture;              // "Hopper", "Ada Lovelace", ...
  std::string cuda_compute_capability;   // "9.0"
  std::string driver_version;            // "570.158.01"
  std::string cuda_driver_version;       // "12.8"
  std::string pci_bus_id;                // "0000:3b:00.0"
  std::optional<std::string> pcie_root;  // "pci0000:3a"
  std::optional<int> numa_node;          // sysfs numa_node; nullopt when absent or negative
  std::optional<uint64_t> memory_bytes;
  std::optional<std::string> addressing_mode;  // "HMM", "ATS", "None"
  // NVML's module id (Fabric Manager's physical id of the GPU); nullopt
  // where NVML cannot say (no NVSwitch board, an NVML without the call).
  std::optional<int> module_id;
  bool mig_enabled = false;
  std::vector<MigDeviceInfo> migs;
  // The MIG profiles the GPU can create, whatever its MIG mode; empty on a
  // GPU without MIG.
  std::vector<MigProfileInfo> mig_profiles;
  // "<clusterUUID>.<cliqueId>", or "" (no multi-node fabric, or its fabric is not up)
  std::string clique_id;
  // What NVML said of the GPU's NVLink fabric; nullopt where nobody asked
  // (the mock, an NVML without nvmlDeviceGetGpuFabricInfo). The ComputeDomain
  // plugin decides the node's clique from it (computedomain/fabric_clique.h).
  std::optional<FabricReading> fabric;
  friend bool operator==(const GpuInfo&, const GpuInfo&) = default;
};

// Whether the GPU's MIG mode changes without a GPU reset (Hopper and newer;
// on Ampere a change stays pending until a reset), as upstream decides.
bool SupportsMigModeToggle(const GpuInfo& gpu);

// Whether dynamic MIG serves the GPU, as upstream decides: it has MIG
// profiles, and its MIG mode toggles or is on already (an Ampere GPU with
// MIG mode off stays a plain full GPU).
bool DynamicMigCapable(const GpuInfo& gpu);

// The GPU's memory slice count: the largest placement size of its MIG
// profiles (the largest profile spans all of them); 0 without MIG.
int MemorySliceCount(const GpuInfo& gpu);

struct NodeInventory {
  std::vector<GpuInfo> gpus;  // sorted by minor
  // With passthrough: NVIDIA GPUs bound to vfio-pci, which NVML cannot see
  // (a passthrough claim prepared before the plugin started). From sysfs:
  // the PCI bus id, pcieRoot and NUMA node only; minor -1, no UUID.
  std::vector<GpuInfo> vfio_gpus;
  std::string driver_version;
  std::string cuda_driver_version;
  std::string clique_id;  // the node's clique (all GPUs agree) or ""
  friend bool operator==(const NodeInventory&, const NodeInventory&) = default;
};

}  // namespace nvdra::devices
