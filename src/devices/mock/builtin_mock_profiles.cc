// The built-in mock hardware profiles, compiled into the binary so
// --mock-hardware=<name> works without files. Values follow what NVML
// reports on these machines.
#include <map>
#include <string>

#include "devices/mock/mock_profile.h"

namespace nvdra::devices {

namespace {

// An HGX H100 8-GPU board: its NVSwitch fabric offers Fabric Manager's
// partitions of the shared NVSwitch mode (one of 8 GPUs, two of 4, four of
// 2, eight of 1), the ids Fabric Manager gives them there.
const char* kH100x8 = R"json({
  "driverVersion": "570.158.01",
  "cudaDriverVersion": "12.8",
  "gpus": [
    {
      "count": 8,
      "productName": "NVIDIA H100 80GB HBM3",
      "brand": "Nvidia",
      "architecture": "Hopper",
      "cudaComputeCapability": "9.0",
      "memoryBytes": 85520809984,
      "addressingMode": "HMM",
      "pciBusIds": ["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
                    "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"],
      "pcieRoots": ["pci0000:15", "pci0000:27", "pci0000:37", "pci0000:5a",
                    "pci0000:97", "pci0000:a8", "pci0000:b7", "pci0000:d7"],
      "numaNodes": [0, 0, 0, 0, 1, 1, 1, 1],
      "moduleIds": [1, 2, 3, 4, 5, 6, 7, 8]
    }
  ],
  "fabricPartitions": [
    {"id": 0, "moduleIds": [1, 2, 3, 4, 5, 6, 7, 8]},
    {"id": 1, "moduleIds": [1, 2, 3, 4]}, {"id": 2, "moduleIds": [5, 6, 7, 8]},
    {"id": 3, "moduleIds": [1, 2]}, {"id": 4, "moduleIds": [3, 4]},
    {"id": 5, "moduleIds": [5, 6]}, {"id": 6, "moduleIds": [7, 8]},
    {"id": 7, "moduleIds": [1]}, {"id": 8, "moduleIds": [2]}, {"id": 9, "moduleIds": [3]},
    {"id": 10, "moduleIds": [4]}, {"id": 11, "moduleIds": [5]}, {"id": 12, "moduleIds": [6]},
    {"id": 13, "moduleIds": [7]}, {"id": 14, "moduleIds": [8]}
  ]
})json";

const char* kA100Mig = R"json({
  "driverVersion": "550.127.08",
  "cudaDriverVersion": "12.4",
  "gpus": [
    {
      "count": 2,
      "productName": "NVIDIA A100-SXM4-40GB",
      "brand": "Nvidia",
      "architecture": "Ampere",
      "cudaComputeCapability": "8.0",
      "memoryBytes": 42949672960,
      "pciBusIds": ["0000:07:00.0", "0000:0f:00.0"],
      "pcieRoots": ["pci0000:00", "pci0000:00"]
    },
    {
      "productName": "NVIDIA A100-SXM4-40GB",
      "brand": "Nvidia",
      "architecture": "Ampere",
      "cudaComputeCapability": "8.0",
      "memoryBytes": 42949672960,
      "pciBusIds": ["0000:47:00.0"],
      "pcieRoots": ["pci0000:40"],
      "migEnabled": true,
      "migDevices": [
        {"profile": "3g.20gb", "giProfileId": 9, "ciProfileId": 2, "giId": 2, "ciId": 0,
         "placementStart": 0, "placementSize": 4, "multiprocessors": 42, "copyEngines": 3,
         "decoders": 2, "encoders": 0, "jpegEngines": 0, "ofaEngines": 0, "memoryBytes": 20937965568},
        {"profile": "2g.10gb", "giProfileId": 14, "ciProfileId": 1, "giId": 3, "ciId": 0,
         "placementStart": 4, "placementSize": 2, "multiprocessors": 28, "copyEngines": 2,
         "decoders": 1, "encoders": 0, "jpegEngines": 0, "ofaEngines": 0, "memoryBytes": 10334765056},
        {"profile": "1g.5gb", "giProfileId": 19, "ciProfileId": 0, "giId": 9, "ciId": 0,
         "placementStart": 6, "placementSize": 1, "multiprocessors": 14, "copyEngines": 1,
         "decoders": 0, "encoders": 0, "jpegEngines": 0, "ofaEngines": 0, "memoryBytes": 5100273664}
      ]
    },
    {
      "productName": "NVIDIA A100-SXM4-40GB",
      "brand": "Nvidia",
      "architecture": "Ampere",
      "cudaComputeCapability": "8.0",
      "memoryBytes": 42949672960,
      "pciBusIds": ["0000:4e:00.0"],
      "pcieRoots": ["pci0000:40"],
      "migEnabled": true,
      "migDevices": [
        {"profile": "1g.5gb+me", "giProfileId": 20, "ciProfileId": 0, "giId": 13, "ciId": 0,
         "placementStart": 0, "placementSize": 1, "multiprocessors": 14, "copyEngines": 1,
         "decoders": 1, "encoders": 0, "jpegEngines": 1, "ofaEngines": 1, "memoryBytes": 5100273664},
        {"profile": "1c.3g.20gb", "giProfileId": 9, "ciProfileId": 0, "giId": 1, "ciId": 0,
         "placementStart": 4, "placementSize": 4, "multiprocessors": 14, "copyEngines": 3,
         "decoders": 2, "encoders": 0, "jpegEngines": 0, "ofaEngines": 0, "memoryBytes": 20937965568}
      ]
    }
  ]
})json";

const char* kGb200x4 = R"json({
  "driverVersion": "570.158.01",
  "cudaDriverVersion": "12.8",
  "clique": {"clusterUUID": "5e2c8a14-7d3b-4f9e-a1c6-0b8d2f4e6a90", "cliqueId": 32766},
  "imexChannels": 8,
  "gpus": [
    {
      "count": 4,
      "productName": "NVIDIA GB200",
      "brand": "Nvidia",
      "architecture": "Blackwell",
      "cudaComputeCapability": "10.0",
      "memoryBytes": 199715979264,
      "addressingMode": "ATS",
      "pciBusIds": ["0008:01:00.0", "0009:01:00.0", "0018:01:00.0", "0019:01:00.0"],
      "pcieRoots": ["pci0008:00", "pci0009:00", "pci0018:00", "pci0019:00"]
    }
  ]
})json";

// Dynamic MIG, the four cases upstream tells apart: an H100 (MIG mode
// toggles without a reset) with MIG mode off and one with it on, an A100
// with MIG mode off (no dynamic MIG: a plain full GPU) and one with it on
// (MIG devices only: leaving MIG mode would need a GPU reset).
const char* kDynamicMig = R"json({
  "driverVersion": "570.158.01",
  "cudaDriverVersion": "12.8",
  "gpus": [
    {
      "productName": "NVIDIA H100 80GB HBM3",
      "brand": "Nvidia",
      "architecture": "Hopper",
      "cudaComputeCapability": "9.0",
      "memoryBytes": 85520809984,
      "addressingMode": "HMM",
      "pciBusIds": ["0000:18:00.0"],
      "pcieRoots": ["pci0000:15"],
      "numaNodes": [0],
      "migProfiles": "h100-80gb"
    },
    {
      "productName": "NVIDIA H100 80GB HBM3",
      "brand": "Nvidia",
      "architecture": "Hopper",
      "cudaComputeCapability": "9.0",
      "memoryBytes": 85520809984,
      "addressingMode": "HMM",
      "pciBusIds": ["0000:2a:00.0"],
      "pcieRoots": ["pci0000:27"],
      "numaNodes": [0],
      "migEnabled": true,
      "migProfiles": "h100-80gb"
    },
    {
      "productName": "NVIDIA A100-SXM4-40GB",
      "brand": "Nvidia",
      "architecture": "Ampere",
      "cudaComputeCapability": "8.0",
      "memoryBytes": 42949672960,
      "pciBusIds": ["0000:47:00.0"],
      "pcieRoots": ["pci0000:40"],
      "numaNodes": [1],
      "migProfiles": "a100-40gb"
    },
    {
      "productName": "NVIDIA A100-SXM4-40GB",
      "brand": "Nvidia",
      "architecture": "Ampere",
      "cudaComputeCapability": "8.0",
      "memoryBytes": 42949672960,
      "pciBusIds": ["0000:4e:00.0"],
      "pcieRoots": ["pci0000:40"],
      "numaNodes": [1],
      "migEnabled": true,
      "migProfiles": "a100-40gb"
    }
  ]
})json";

std::vector<MigPlacement> Placements(int count, int step, int size) {
  std::vector<MigPlacement> out;
  for (int i = 0; i < count; ++i) out.push_back({i * step, size});
  return out;
}

// As NVML reports them on an A100-SXM4-40GB (memorySizeMB in MiB; the
// profiles whose compute instance spans the GPU instance).
std::vector<MigProfileInfo> A100Sxm4_40gb() {
  constexpr uint64_t kMiB = 1024 * 1024;
  return {
      {"1g.5gb", 19, 0, 14, 1, 0, 0, 0, 0, 4864 * kMiB, Placements(7, 1, 1)},
      {"1g.5gb+me", 20, 0, 14, 1, 1, 0, 1, 1, 4864 * kMiB, Placements(7, 1, 1)},
      {"1g.10gb", 15, 0, 14, 1, 1, 0, 0, 0, 9856 * kMiB, Placements(4, 2, 2)},
      {"2g.10gb", 14, 1, 28, 2, 1, 0, 0, 0, 9856 * kMiB, Placements(3, 2, 2)},
      {"3g.20gb", 9, 2, 42, 3, 2, 0, 0, 0, 19968 * kMiB, Placements(2, 4, 4)},
      {"4g.20gb", 5, 3, 56, 4, 2, 0, 0, 0, 19968 * kMiB, Placements(1, 4, 4)},
      {"7g.40gb", 0, 4, 98, 7, 5, 0, 1, 1, 40192 * kMiB, Placements(1, 8, 8)},
  };
}

// As NVML reports them on an H100 80GB HBM3.
std::vector<MigProfileInfo> H100_80gb() {
  constexpr uint64_t kMiB = 1024 * 1024;
  return {
      {"1g.10gb", 19, 0, 16, 1, 1, 0, 1, 0, 9984 * kMiB, Placements(7, 1, 1)},
      {"1g.10gb+me", 20, 0, 16, 1, 1, 0, 1, 1, 9984 * kMiB, Placements(7, 1, 1)},
      {"1g.20gb", 15, 0, 26, 1, 1, 0, 1, 0, 20096 * kMiB, Placements(4, 2, 2)},
      {"2g.20gb", 14, 1, 32, 2, 2, 0, 2, 0, 20096 * kMiB, Placements(3, 2, 2)},
      {"3g.40gb", 9, 2, 60, 3, 3, 0, 3, 0, 40320 * kMiB, Placements(2, 4, 4)},
      {"4g.40gb", 5, 3, 64, 4, 4, 0, 4, 0, 40320 * kMiB, Placements(1, 4, 4)},
      {"7g.80gb", 0, 4, 132, 8, 7, 0, 7, 1, 80896 * kMiB, Placements(1, 8, 8)},
  };
}

const std::map<std::string, const char*>& Profiles() {
  static const std::map<std::string, const char*> m = {{"dynamic-mig", kDynamicMig},
                                                       {"a100-mig", kA100Mig},
                                                       {"gb200x4", kGb200x4},
                                                       {"h100x8", kH100x8}};
  return m;
}

}  // namespace

Result<std::vector<MigProfileInfo>> BuiltinMigProfiles(const std::string& model) {
  if (model == "a100-40gb") return A100Sxm4_40gb();
  if (model == "h100-80gb") return H100_80gb();
  return NotFound("no built-in MIG profile table \"" + model + "\" (known: a100-40gb, h100-80gb)");
}

std::vector<std::string> BuiltinMockProfileNames() {
  std::vector<std::string> names;
  for (const auto& [n, _] : Profiles()) names.push_back(n);
  return names;
}

Result<std::string> BuiltinMockProfileJson(const std::string& name) {
  auto it = Profiles().find(name);
  if (it == Profiles().end()) {
    std::string known;
    for (const auto& n : BuiltinMockProfileNames()) known += (known.empty() ? "" : ", ") + n;
    return NotFound("no built-in mock hardware profile \"" + name + "\" (known: " + known + ")");
  }
  return std::string(it->second);
}

}  // namespace nvdra::devices
