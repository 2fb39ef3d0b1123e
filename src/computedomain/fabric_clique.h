// The node's NVLink clique, "<clusterUUID>.<cliqueId>", decided from each
// GPU's NVML fabric info (nvmlDeviceGetGpuFabricInfo) as the upstream plugin
// decides it, including its policy for fabric errors: with the
// CrashOnNVLinkFabricErrors gate a fabric that did not come up is fatal, except
// on a single-node NVLink system (GPUs with no multi-node cluster UUID),
// where it only means "no clique" (upstream fixed that crash in 2026).
// Without the gate an error is logged and the node has no clique. With
// FabricManagerPartitioning on a node with a local NVSwitch fabric, a GPU
// whose fabric registration is still pending is not an error either (Fabric
// Manager registers a GPU when a partition holding it is activated), as
// upstream.
#pragma once

#include <string>
#include <vector>

#include "devices/device_info.h"
#include "util/status.h"

namespace nvdra::computedomain {

// One GPU's fabric reading, named for messages.
struct GpuFabricReading : devices::FabricReading {
  std::string gpu;  // UUID
};

struct CliqueIdentity {
  std::string clique_id;  // "" without a clique
  // A fabric error that was not fatal (gate off, or a single-node system).
  std::string warning;
};

// kFailedPrecondition when GPUs disagree on their clique or (with the gate)
// a multi-node fabric did not come up; the message names the GPU.
// `fabric_manager_partitions`: FabricManagerPartitioning on a node with a
// local NVSwitch fabric (devices::HasFabricManagerFabric).
Result<CliqueIdentity> IdentifyClique(const std::vector<GpuFabricReading>& gpus, bool crash_on_fabric_errors,
                                      bool fabric_manager_partitions = false);

// The node's clique from its inventory: IdentifyClique over the GPUs' NVML
// fabric readings; an inventory without readings (the mock) keeps its clique.
Result<CliqueIdentity> IdentifyNodeClique(const devices::NodeInventory& inventory, bool crash_on_fabric_errors,
                                          bool fabric_manager_partitions = false);

// The log line operators grep for ("identified fabric clique").
std::string CliqueLogLine(const CliqueIdentity& identity);

// IMEX daemons with DNS names (the IMEXDaemonsWithDNSNames gate) need driver
// 570.158.01 or newer; upstream refuses to start below it with
// "minimum version not satisfied for IMEXDaemonsWithDNSNames feature".
inline constexpr const char* kMinDriverForDnsNames = "570.158.01";
// "driver version validation: ..." (operators grep for it) on success.
Result<std::string> ValidateDriverVersion(const std::string& driver_version, bool dns_names_gate);

}  // namespace nvdra::computedomain
