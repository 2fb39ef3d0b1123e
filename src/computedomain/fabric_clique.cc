#include "computedomain/fabric_clique.h"

#include <set>
#include <vector>

#include "util/parse_number.h"

namespace nvdra::computedomain {

Result<CliqueIdentity> IdentifyClique(const std::vector<GpuFabricReading>& gpus, bool crash_on_fabric_errors,
                                      bool fabric_manager_partitions) {
  CliqueIdentity out;
  std::set<std::string> cliques;
  for (const auto& g : gpus) {
    if (!g.supported) {
      cliques.insert("");
      continue;
    }
    bool ok = g.completed && g.healthy;
    if (!ok) {
      std::string what = "NVLink fabric of GPU " + g.gpu + " is not ready (" + g.detail + ")";
      bool multi_node = !g.cluster_uuid.empty();
      // Pending until Fabric Manager activates a partition holding the GPU.
      const bool awaiting_partition = fabric_manager_partitions && !g.completed;
      if (crash_on_fabric_errors && multi_node && !awaiting_partition) {
        return FailedPrecondition(what + "; with the CrashOnNVLinkFabricErrors feature gate this is fatal: check the "
                                         "fabric manager and the NVLink switches, or disable the gate to run without a "
                                         "clique");
      }
      if (out.warning.empty()) {
        out.warning = what + (awaiting_partition
                                  ? "; its registration may wait for a Fabric Manager partition (single-node NVLink "
                                    "system with FabricManagerPartitioning), running without a clique"
                              : multi_node ? "; CrashOnNVLinkFabricErrors is off, running without a clique"
                                           : "; a single-node NVLink system, running without a clique");
      }
      cliques.insert("");
      continue;
    }
    cliques.insert(g.cluster_uuid.empty() ? "" : g.cluster_uuid + "." + std::to_string(g.clique_id));
  }
  // A fabric that is not up (and not fatal) leaves the whole node without a
  // clique: the GPUs that are up do not make a clique the others lack.
  if (!out.warning.empty()) return out;
  if (cliques.size() > 1) {
    std::string list;
    for (const auto& c : cliques) list += (list.empty() ? "" : ", ") + (c.empty() ? "<none>" : c);
    return FailedPrecondition("GPUs disagree on their NVLink clique (" + list + "); check the fabric manager");
  }
  if (!cliques.empty()) out.clique_id = *cliques.begin();
  return out;
}

Result<CliqueIdentity> IdentifyNodeClique(const devices::NodeInventory& inventory, bool crash_on_fabric_errors,
                                          bool fabric_manager_partitions) {
  std::vector<GpuFabricReading> readings;
  for (const auto& g : inventory.gpus) {
    if (!g.fabric) continue;
    GpuFabricReading r{*g.fabric, g.uuid};
    readings.push_back(std::move(r));
  }
  if (readings.empty()) return CliqueIdentity{inventory.clique_id, ""};
  return IdentifyClique(readings, crash_on_fabric_errors, fabric_manager_partitions);
}

std::string CliqueLogLine(const CliqueIdentity& identity) {
  if (identity.clique_id.empty()) return "identified fabric clique: none (no multi-node NVLink fabric)";
  return "identified fabric clique: " + identity.clique_id;
}

namespace {

// "570.158.01" -> {570, 158, 1}; non-numeric parts end the version.
std::vector<long> VersionParts(const std::string& v) {
  std::vector<long> out;
  size_t i = 0;
  while (i < v.size()) {
    size_t j = v.find('.', i);
    if (j == std::string::npos) j = v.size();
    std::string part = v.substr(i, j - i);
    auto n = ParseInt64(part);
    if (!n.ok()) break;
    out.push_back(*n);
    i = j + 1;
  }
  return out;
}

}  // namespace

Result<std::string> ValidateDriverVersion(const std::string& driver_version, bool dns_names_gate) {
  if (!dns_names_gate) {
    return "driver version validation: " + driver_version + " (no minimum without IMEXDaemonsWithDNSNames)";
  }
  auto have = VersionParts(driver_version);
  auto want = VersionParts(kMinDriverForDnsNames);
  if (have.empty() || have < want) {
    return FailedPrecondition("minimum version not satisfied for IMEXDaemonsWithDNSNames feature: driver " +
                              driver_version + " < " + kMinDriverForDnsNames +
                              " (upgrade the driver or set IMEXDaemonsWithDNSNames=false)");
  }
  return "driver version validation: " + driver_version + " >= " + kMinDriverForDnsNames +
         " for IMEXDaemonsWithDNSNames: ok";
}

}  // namespace nvdra::computedomain
